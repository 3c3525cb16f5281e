import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { type PostgresFaultProxy, type RequestMatcher, startPostgresFaultProxy } from '../src/postgres-fault-proxy';
import { postgresUrl, testSchema } from './databases';

/** The proxy's faults, against PostgreSQL and the real driver: what each does to a write and what the caller sees. */
const pg = testSchema();
let proxy: PostgresFaultProxy;
let pool: Pool;
let pipelined: Pool;

beforeAll(async () => {
  proxy = await startPostgresFaultProxy(postgresUrl());
  pool = pg.pool2({ connectionString: proxy.url });
  pipelined = pg.pool2({ connectionString: proxy.url, pipeline: true });
});
afterAll(() => proxy?.close());

const insertOf = (pk: string) => `INSERT INTO ${pg.effectsTable} (pk, sk) VALUES ('${pk}', 'ITEM')`;
const commitOf = (pk: string): RequestMatcher => ({
  name: `COMMIT of ${pk}`,
  when: (request) => request.text === 'COMMIT' && request.transaction.some((r) => r.text.includes(pk)),
});

describe('startPostgresFaultProxy', () => {
  it('forwards what no rule matches, untouched, and names each request with its parameters', async () => {
    const pk = randomUUID();
    const { rows } = await pool.query('SELECT $1::text AS echoed', [pk]);
    expect(rows).toEqual([{ echoed: pk }]);
    const seen = proxy.requests({ name: pk, when: (request) => request.params.includes(pk) });
    expect(seen).toEqual([
      { text: 'SELECT $1::text AS echoed', params: [pk], transaction: [], rule: undefined, outcome: 'answered' },
    ]);
  });

  it('names a prepared statement by its text each time, though pg sends the text only once per connection', async () => {
    const pk = randomUUID();
    const client = await pool.connect();
    try {
      for (const n of [1, 2]) {
        await client.query({ name: `echo-${pk}`, text: 'SELECT $1::text AS echoed, $2::int AS n', values: [pk, n] });
      }
    } finally {
      client.release();
    }
    const seen = proxy.requests({ name: pk, when: (request) => request.params.includes(pk) });
    expect(seen.map((request) => [request.text, request.params])).toEqual([
      ['SELECT $1::text AS echoed, $2::int AS n', [pk, '1']],
      ['SELECT $1::text AS echoed, $2::int AS n', [pk, '2']],
    ]);
  });

  it('runs a statement whose reply it drops, and closes the connection: the caller cannot tell it landed', async () => {
    const pk = randomUUID();
    const match = { name: `insert of ${pk}`, when: (request: { text: string }) => request.text.includes(pk) };
    const rule = proxy.arm({ match, fault: { mode: 'drop-reply' }, count: 1 });
    await expect(pool.query(insertOf(pk))).rejects.toThrow('Connection terminated unexpectedly');
    expect(rule.fired()).toBe(1);
    expect(await pg.rowsUnder(pk)).toBe(1);
    expect(proxy.requests(match).map((request) => request.outcome)).toEqual(['dropped']);
  });

  it('loses the reply to a COMMIT after the transaction committed, pipelined or not', async () => {
    for (const through of [pool, pipelined]) {
      const pk = randomUUID();
      const rule = proxy.arm({ match: commitOf(pk), fault: { mode: 'drop-reply' }, count: 1 });
      const client = await through.connect();
      client.on('error', () => undefined);
      const send = (text: string) => client.query(text);
      // Pipelined: all three at once; otherwise each after the last one's reply, as pg requires.
      const settled =
        through === pipelined
          ? await Promise.allSettled([send('BEGIN'), send(insertOf(pk)), send('COMMIT')])
          : [
              ...(await Promise.allSettled([send('BEGIN')])),
              ...(await Promise.allSettled([send(insertOf(pk))])),
              ...(await Promise.allSettled([send('COMMIT')])),
            ];
      client.release(true);
      expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
      expect(rule.fired()).toBe(1);
      expect(await pg.rowsUnder(pk)).toBe(1);
    }
  });

  it('knows the transaction a request belongs to, and loses nothing it was not told to', async () => {
    const pk = randomUUID();
    const client = await pipelined.connect();
    await Promise.all([client.query('BEGIN'), client.query(insertOf(pk)), client.query('COMMIT')]);
    client.release();
    const commit = proxy.requests(commitOf(pk));
    expect(commit).toHaveLength(1);
    expect(commit[0]?.transaction.map((request) => request.text)).toEqual(['BEGIN', insertOf(pk)]);
    expect(commit[0]?.outcome).toBe('answered');
  });

  it('holds a reply it delays, while the statement has already run', async () => {
    const pk = randomUUID();
    const match = { name: `insert of ${pk}`, when: (request: { text: string }) => request.text.includes(pk) };
    proxy.arm({ match, fault: { mode: 'delay-reply', ms: 1000 }, count: 1 });
    const startedAt = Date.now();
    const insert = pool.query(insertOf(pk));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await pg.rowsUnder(pk)).toBe(1);
    expect(proxy.requests(match).map((request) => request.outcome)).toEqual(['pending']);
    await insert;
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(1000);
    expect(proxy.requests(match).map((request) => request.outcome)).toEqual(['answered']);
  });

  it('faults only `count` matching requests', async () => {
    const match = { name: 'select 42', when: (request: { text: string }) => request.text === 'SELECT 42' };
    const rule = proxy.arm({ match, fault: { mode: 'drop-reply' }, count: 2 });
    await expect(pool.query('SELECT 42')).rejects.toThrow();
    await expect(pool.query('SELECT 42')).rejects.toThrow();
    await pool.query('SELECT 42');
    expect(rule.fired()).toBe(2);
  });
});
