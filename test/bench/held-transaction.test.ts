import { randomUUID } from 'node:crypto';
import { ConnectionTracker } from '@keystone-idempotency/local-aws/pg-meter';
import { Pool } from 'pg';
import { ConflictError, Db, documentTableSql, withIdempotency } from '../../bench/held-transaction';
import { eventually } from '../support/eventually';
import { postgresUrl } from '../support/postgres';

/**
 * The benchmark's reference, the design documents' `withIdempotency`, behaves as the documents say it does: the work
 * once, the stored response replayed, a different request refused, and a concurrent duplicate kept waiting on the key
 * until the original's transaction commits, holding the original's connection all along.
 */
describe('withIdempotency, as the design documents write it', () => {
  const schema = `bench_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const pool = new Pool({ connectionString: postgresUrl(), max: 8 });
  const db = new Db(pool, schema);
  const scope = (key: string, requestHash = 'hash-a') => ({ accountId: 42, key, requestHash });

  beforeAll(async () => {
    await pool.query(documentTableSql(schema));
  });
  afterAll(async () => {
    await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
    await pool.end();
  });

  it('does the work once and replays the stored response', async () => {
    const key = randomUUID();
    const work = jest.fn(async () => ({ statusCode: 201, body: 'paid' }));
    expect(await withIdempotency(db, scope(key), work)).toEqual({ statusCode: 201, body: 'paid' });
    expect(await withIdempotency(db, scope(key), work)).toEqual({ statusCode: 201, body: 'paid' });
    expect(work).toHaveBeenCalledTimes(1);
  });

  it('refuses the same key with another request', async () => {
    const key = randomUUID();
    await withIdempotency(db, scope(key), async () => ({ done: true }));
    await expect(withIdempotency(db, scope(key, 'hash-b'), async () => ({ other: true }))).rejects.toBeInstanceOf(
      ConflictError,
    );
  });

  it('rolls the claim back with the work, so that a retry does the work', async () => {
    const key = randomUUID();
    await expect(
      withIdempotency(db, scope(key), async () => {
        throw new Error('processor down');
      }),
    ).rejects.toThrow('processor down');
    expect(await withIdempotency(db, scope(key), async () => ({ try: 2 }))).toEqual({ try: 2 });
  });

  it('keeps a concurrent duplicate waiting on the key until the original commits, then replays', async () => {
    const key = randomUUID();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    let runs = 0;
    const work = async () => {
      runs++;
      await gate;
      return { charge: 'ch_1' };
    };
    const original = withIdempotency(db, scope(key), work);
    try {
      await eventually(
        () => runs,
        (count) => count === 1,
      );
      let duplicateSettled = false;
      const duplicate = withIdempotency(db, scope(key), work).finally(() => {
        duplicateSettled = true;
      });
      // The duplicate's INSERT waits on the original's uncommitted row: a lock wait, seen from the server.
      await eventually(
        async () => {
          const { rows } = await pool.query<{ waiting: string }>(
            `SELECT count(*) AS waiting FROM pg_stat_activity
              WHERE wait_event_type = 'Lock' AND query LIKE '%${schema}%' AND pid <> pg_backend_pid()`,
          );
          return Number(rows[0]?.waiting);
        },
        (waiting) => waiting === 1,
      );
      expect(duplicateSettled).toBe(false);
      open();
      expect(await original).toEqual({ charge: 'ch_1' });
      expect(await duplicate).toEqual({ charge: 'ch_1' });
      expect(runs).toBe(1);
    } finally {
      open();
      await original.catch(() => undefined);
    }
  });

  it('holds its pooled connection across the work', async () => {
    const tracked = new Pool({ connectionString: postgresUrl(), max: 2 });
    try {
      const connections = new ConnectionTracker(tracked);
      let heldDuringWork: number | undefined;
      await connections.within(() =>
        withIdempotency(new Db(tracked, schema), scope(randomUUID()), async () => {
          heldDuringWork = connections.heldByThisCall();
          return { ok: true };
        }),
      );
      expect(heldDuringWork).toBe(1);
    } finally {
      await tracked.end();
    }
  });
});
