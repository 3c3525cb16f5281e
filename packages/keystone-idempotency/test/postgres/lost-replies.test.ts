import { randomUUID } from 'node:crypto';
import { type PostgresFaultProxy, startPostgresFaultProxy } from '@keystone-idempotency/local-aws/postgres-fault-proxy';
import { scopedKey } from '../../src/engine/key';
import type { Lease, StoredResponse } from '../../src/engine/record';
import type { PostgresEffect, PostgresStore } from '../../src/postgres/store';
import { testPostgres } from '../support/postgres';
import { postgresEngineRequests } from '../support/postgres-engine-requests';

/**
 * How the PostgreSQL store gets past a reply lost on the wire (the contract suite checks that it does, on both
 * stores): it sends the very same statements again on a fresh connection, and they meet what their first sending
 * wrote. And a reply that is only slow is simply waited for.
 */
const pg = testPostgres();
const requests = postgresEngineRequests();
let proxy: PostgresFaultProxy;

beforeAll(async () => {
  proxy = await startPostgresFaultProxy(process.env.POSTGRES_URL!);
});
afterAll(() => proxy?.close());

const created: StoredResponse = { statusCode: 201, body: '{"id":"pay_1"}', headers: {} };
const newKey = () => scopedKey({ accountId: 'acct_lost', operation: 'POST /payments', key: randomUUID() });
const row = (pk: string, sk: string): PostgresEffect => ({
  text: `INSERT INTO ${pg.effectsTable} (pk, sk) VALUES ($1, $2)`,
  values: [pk, sk],
});
const throughProxy = (): PostgresStore => pg.store({ pool: pg.pool2({ connectionString: proxy.url, pipeline: true }) });

async function acquire(s: PostgresStore, key: string): Promise<Lease> {
  const outcome = await s.claim(key, 'fp');
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

describe('a lost reply', () => {
  it('to a claim: the same statement is sent again, and meets the record it wrote', async () => {
    const key = newKey();
    proxy.arm({ match: requests.claim(key), fault: { mode: 'drop-reply' }, count: 1 });
    await acquire(throughProxy(), key);
    const sent = proxy.requests(requests.claim(key));
    expect(sent.map((request) => request.outcome)).toEqual(['dropped', 'answered']);
    expect(sent[1]?.params).toEqual(sent[0]?.params);
  });

  it('to a COMMIT: the same transaction is sent again; its completion meets its own, so it writes nothing', async () => {
    const s = throughProxy();
    const key = newKey();
    const lease = await acquire(s, key);
    proxy.arm({ match: requests.commit(key), fault: { mode: 'drop-reply' }, count: 1 });
    await s.commit(lease, created, [row(key, 'once')]);
    const [first, again] = proxy.requests(requests.commit(key));
    expect([first?.outcome, again?.outcome]).toEqual(['dropped', 'answered']);
    expect(again?.transaction).toEqual(first?.transaction);
    expect(await pg.rowsUnder(key)).toBe(1);
  });
});

describe('a slow COMMIT reply', () => {
  it('is waited for: the transaction committed before its reply arrives, and a duplicate replays it', async () => {
    const s = throughProxy();
    const key = newKey();
    const lease = await acquire(s, key);
    proxy.arm({ match: requests.commit(key), fault: { mode: 'delay-reply', ms: 500 }, count: 1 });
    const startedAt = Date.now();
    const commit = s.commit(lease, created, [row(key, 'slow')]);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await pg.store().claim(key, 'fp')).toMatchObject({ kind: 'replay' });
    await commit;
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(500);
    expect(await pg.rowsUnder(key)).toBe(1);
  });
});
