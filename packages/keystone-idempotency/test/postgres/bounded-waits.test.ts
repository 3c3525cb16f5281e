import { randomUUID } from 'node:crypto';
import { Client, Pool } from 'pg';
import { scopedKey } from '../../src/engine/key';
import { ClaimedOperation } from '../../src/engine/operation';
import type { Lease, StoredResponse } from '../../src/engine/record';
import type { PostgresEffect } from '../../src/postgres/effect';
import type { PostgresStore } from '../../src/postgres/store';
import { FakeClock } from '../support/fake-clock';
import { postgresUrl, testPostgres } from '../support/postgres';

/**
 * Every wait of the PostgreSQL store is bounded: on a row another session holds (a commit whose connection went
 * silent holds its key's row until the server ends its session), on a reply that never comes (the call's deadline),
 * and on a connection the server ended under it (sent again on a fresh one, and the process survives it).
 */
const pg = testPostgres();

const created: StoredResponse = { statusCode: 201, body: '{"id":"pay_1"}', headers: {} };
const newKey = () => scopedKey({ accountId: 'acct_waits', operation: 'POST /payments', key: randomUUID() });

async function acquire(s: PostgresStore, key: string): Promise<Lease> {
  const outcome = await s.claim(key, 'fp');
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

/** Settles with `promise`, or with `'still waiting'` after `ms`: a test that must not hang says so instead. */
async function within<T>(ms: number, promise: Promise<T>): Promise<T | 'still waiting'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'still waiting'>((resolve) => {
    timer = setTimeout(() => resolve('still waiting'), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Another session that holds the key's row in an open transaction, as a commit whose connection went silent does
 * (its completion written, its COMMIT never arriving): until `end()`, which rolls it back.
 */
async function holdRow(key: string): Promise<{ end(): Promise<void> }> {
  const client = new Client({ connectionString: postgresUrl() });
  client.on('error', () => undefined);
  await client.connect();
  const [scope, clientKey] = [key.slice(0, key.lastIndexOf('|')), key.slice(key.lastIndexOf('|') + 1)];
  await client.query('BEGIN');
  const { rowCount } = await client.query(
    `SELECT 1 FROM "${pg.schema}".idempotency_keys WHERE scope = $1 AND key = $2 FOR UPDATE`,
    [scope, clientKey],
  );
  if (rowCount !== 1) throw new Error(`no row to hold for ${key}`);
  return {
    async end() {
      await client.query('ROLLBACK').catch(() => undefined);
      await client.end().catch(() => undefined);
    },
  };
}

describe('a claim meeting a row another session holds', () => {
  const clock = new FakeClock(Date.now());
  const store = () => pg.store({ clock, leaseSeconds: 2, ttlSeconds: 2, lockTimeoutMs: 300 });
  const holders: { end(): Promise<void> }[] = [];
  afterEach(async () => {
    await Promise.all(holders.splice(0).map((holder) => holder.end()));
  });

  it('answers in flight after the lock timeout when it would take over a lease run out', async () => {
    const s = store();
    const key = newKey();
    await acquire(s, key);
    holders.push(await holdRow(key));
    clock.advance(2_500); // the owner's lease ran out: a takeover, which waits on the held row
    const answer = await within(5_000, s.claim(key, 'fp'));
    expect(answer).toMatchObject({ kind: 'in_flight', retryAfterMs: 1000 });
  });

  it('answers in flight after the lock timeout when it would claim a record past its expiry', async () => {
    const s = store();
    const key = newKey();
    await s.commit(await acquire(s, key), created);
    holders.push(await holdRow(key));
    clock.advance(3_000); // past its TTL: a fresh claim, whose INSERT ... ON CONFLICT waits on the held row
    expect(await within(5_000, s.claim(key, 'fp'))).toMatchObject({ kind: 'in_flight' });
  });

  it('replays a completed key from what is committed, without waiting on the row at all', async () => {
    // A lock timeout longer than the test's patience: an answer in time proves no lock was waited for.
    const s = pg.store({ lockTimeoutMs: 60_000 });
    const key = newKey();
    await s.commit(await acquire(s, key), created);
    holders.push(await holdRow(key));
    expect(await within(3_000, s.claim(key, 'fp'))).toMatchObject({ kind: 'replay', response: created });
  });

  it('answers a duplicate of a live owner in flight, without waiting on the row', async () => {
    const s = pg.store({ lockTimeoutMs: 60_000 });
    const key = newKey();
    await acquire(s, key);
    holders.push(await holdRow(key));
    expect(await within(3_000, s.claim(key, 'fp'))).toMatchObject({ kind: 'in_flight' });
  });

  it('is still one round trip for a replay', async () => {
    const s = pg.store();
    const key = newKey();
    await s.commit(await acquire(s, key), created);
    pg.roundTrips.reset();
    expect((await s.claim(key, 'fp')).kind).toBe('replay');
    expect(pg.roundTrips.count).toBe(1);
  });

  it('answers recovery in flight when the row it would take over is held', async () => {
    const s = store();
    const key = newKey();
    const outcome = await s.claim(key, 'fp', { recoverable: true });
    if (outcome.kind !== 'acquired') throw new Error('not acquired');
    holders.push(await holdRow(key));
    clock.advance(2_500);
    expect(await within(5_000, s.resume(key))).toMatchObject({ kind: 'in_flight' });
  });
});

describe('a call with a deadline', () => {
  it('gives up on a query when the deadline passes, and leaves no connection behind waiting', async () => {
    const pool = pg.pool2({ pipeline: true, max: 1 });
    const deadline = Date.now() + 700;
    const s = pg.store({ pool, deadline: () => deadline, lockTimeoutMs: 60_000 });
    const key = newKey();
    const lease = await acquire(s, key);
    const holder = await holdRow(key);
    try {
      // The release waits on the held row (a 60 s lock timeout): only the deadline stops it.
      const started = Date.now();
      const outcome = await within(
        5_000,
        s.release(lease).catch((error: unknown) => error),
      );
      expect(outcome).toBeInstanceOf(Error);
      expect(Date.now() - started).toBeLessThan(3_000);
      // And a call begun once the deadline passed is refused at once, without a query.
      await expect(within(1_000, s.claim(newKey(), 'fp'))).rejects.toThrow(/ran out of time/);
    } finally {
      await holder.end();
    }
    // The pool's one connection was destroyed, not handed back still waiting: a call without a deadline goes through.
    expect((await pg.store({ pool }).claim(newKey(), 'fp')).kind).toBe('acquired');
  });
});

describe('sessions the server terminates under a pipelining pool shared with plain queries', () => {
  let pool: Pool;
  const uncaught: unknown[] = [];
  const onUncaught = (error: unknown) => uncaught.push(error);
  beforeAll(() => {
    process.on('uncaughtException', onUncaught);
    // A pool as a function builds it (the reference service's lib/runtime/postgres.ts does the same): pipelining, a
    // listener for `error` on the pool and on every client, and shared by the store and the function's pool.query.
    pool = new Pool({ connectionString: postgresUrl(), pipeline: true, max: 3 });
    pool.on('error', () => undefined);
    pool.on('connect', (client) => client.on('error', () => undefined));
  });
  afterAll(async () => {
    process.removeListener('uncaughtException', onUncaught);
    await pool.end();
  });

  /** Ends every session of `pool`'s connections, from another connection, as an administrator or a failover does. */
  async function terminateSessionsOf(target: Pool): Promise<number> {
    const clients = (target as unknown as { _clients: { processID: number | null }[] })._clients;
    const pids = clients.map((client) => client.processID).filter((pid): pid is number => pid !== null);
    const { rows } = await pg.pool.query<{ ended: boolean }>(
      'SELECT pg_terminate_backend(pid) AS ended FROM unnest($1::int[]) AS pid',
      [pids],
    );
    return rows.filter((row) => row.ended).length;
  }

  it('sends the next store calls again on fresh connections, and nothing crashes', async () => {
    const s = pg.store({ pool });
    const plainQuery = () => pool.query('SELECT pg_sleep(0.05)').catch(() => 'failed');
    for (let round = 0; round < 3; round++) {
      await Promise.all([plainQuery(), plainQuery(), plainQuery()]); // the pool's connections, all open
      // Connections in every state: idle, running a plain query, running a store call.
      const busy = [plainQuery(), plainQuery(), s.claim(newKey(), 'fp')];
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(await terminateSessionsOf(pool)).toBeGreaterThan(0);
      await Promise.all(busy.map((call) => Promise.resolve(call).catch(() => 'failed')));
      // Every store call after the terminations goes through, however many dead clients the pool still had.
      const calls = await Promise.all(Array.from({ length: 6 }, () => s.claim(newKey(), 'fp')));
      expect(calls.map((call) => call.kind)).toEqual(Array(6).fill('acquired'));
      await plainQuery();
    }
    await new Promise((resolve) => setTimeout(resolve, 100)); // the sockets' last events
    expect(uncaught).toEqual([]);
  });
});

describe("a commit's transaction is bounded in the server as well", () => {
  /** The session's settings as an effect function sees them, inside the commit's own transaction. */
  const settingsSeen =
    (into: Record<string, string>): PostgresEffect =>
    async (tx) => {
      const { rows } = await tx.query<{ statement: string; idle: string }>(
        `SELECT current_setting('statement_timeout') AS statement,
              current_setting('idle_in_transaction_session_timeout') AS idle`,
      );
      Object.assign(into, rows[0]);
    };
  const ms = (setting: string | undefined) => {
    const found = /^(\d+)(ms|s|min)?$/.exec(setting ?? '');
    if (!found) throw new Error(`not a duration: ${setting}`);
    return Number(found[1]) * ({ s: 1000, min: 60_000 }[found[2] ?? ''] ?? 1);
  };

  it('by the time the call has left (statement_timeout), when it has a deadline', async () => {
    const deadline = Date.now() + 20_000;
    const s = pg.store({ deadline: () => deadline, idleInTransactionTimeoutMs: 4_000 });
    const seen: Record<string, string> = {};
    await s.commit(await acquire(s, newKey()), created, [settingsSeen(seen)]);
    // What was left when the transaction began: a little under 20 s, never a millisecond, never unbounded.
    expect(ms(seen.statement)).toBeGreaterThan(10_000);
    expect(ms(seen.statement)).toBeLessThanOrEqual(20_000);
    expect(ms(seen.idle)).toBe(4_000);
    // A step that takes 50 ms is well within it.
    await s.commit(await acquire(s, newKey()), created, [{ text: 'SELECT pg_sleep(0.05)' }]);
  });

  it("by the session's own setting when the call has no deadline", async () => {
    const s = pg.store();
    const seen: Record<string, string> = {};
    await s.commit(await acquire(s, newKey()), created, [settingsSeen(seen)]);
    const { rows } = await pg.pool.query<{ statement: string }>(
      `SELECT current_setting('statement_timeout') AS statement`,
    );
    expect(seen.statement).toBe(rows[0]?.statement);
  });

  it('the same for a checkpoint with effects', async () => {
    const deadline = Date.now() + 20_000;
    const s = pg.store({ deadline: () => deadline });
    const seen: Record<string, string> = {};
    const lease = await acquire(s, newKey());
    await new ClaimedOperation(s, lease).handle.step('charge', async (step) => {
      step.stage(settingsSeen(seen));
      return 'ch_1';
    });
    expect(seen.statement).toBeDefined();
    expect(ms(seen.statement)).toBeGreaterThan(10_000);
    expect(ms(seen.statement)).toBeLessThanOrEqual(20_000);
  });
});

describe('a one-shot meeting a row another session holds', () => {
  const oneShot = (s: PostgresStore, key: string) =>
    s.claimAndCommit(key, 'fp', async () => ({ response: created, effects: [{ text: 'SELECT 1' }] }));

  it('writes nothing and ends within its rounds when the takeover it would make waits on a held row', async () => {
    const clock = new FakeClock(Date.now());
    const s = pg.store({ clock, leaseSeconds: 2, ttlSeconds: 2, lockTimeoutMs: 300 });
    const key = newKey();
    const lease = await acquire(s, key);
    const holder = await holdRow(key);
    try {
      clock.advance(2_500); // the owner's lease ran out: the one-shot's write is a takeover, which waits on the row
      // Each round waits the lock timeout, reads the record as committed (still the first owner's) and tries again;
      // then it gives up contended (a retryable answer). A claim answers in flight at once here (above).
      const started = Date.now();
      const answer = await within(
        5_000,
        oneShot(s, key).catch((e: unknown) => e),
      );
      expect(answer).toMatchObject({ name: 'ContendedError' });
      // More than one round: a holder that commits meanwhile is met (and replayed) on the next read.
      expect(Date.now() - started).toBeGreaterThanOrEqual(600);
    } finally {
      await holder.end();
    }
    // The row as it stands (a read through the store would hide it: its ttl ran out on the fake clock).
    const { rows } = await pg.pool.query(
      `SELECT status, lease_token FROM "${pg.schema}".idempotency_keys WHERE scope = $1 AND key = $2`,
      [key.slice(0, key.lastIndexOf('|')), key.slice(key.lastIndexOf('|') + 1)],
    );
    expect(rows).toEqual([{ status: 'IN_PROGRESS', lease_token: lease.leaseToken }]);
  });

  it('is contended (never in flight, never written) while another session inserts the same key uncommitted', async () => {
    const s = pg.store({ lockTimeoutMs: 300 });
    const template = newKey();
    await acquire(s, template);
    const key = newKey();
    // Another session's insert of `key`, not yet committed: invisible to a read, holding the unique index entry.
    const client = new Client({ connectionString: postgresUrl() });
    client.on('error', () => undefined);
    await client.connect();
    try {
      await client.query('BEGIN');
      const table = `"${pg.schema}".idempotency_keys`;
      await client.query(
        `INSERT INTO ${table}
         SELECT (jsonb_populate_record(NULL::${table}, to_jsonb(r) || jsonb_build_object('key', $3::text))).*
           FROM ${table} AS r WHERE r.scope = $1 AND r.key = $2`,
        [
          template.slice(0, template.lastIndexOf('|')),
          template.slice(template.lastIndexOf('|') + 1),
          key.slice(key.lastIndexOf('|') + 1),
        ],
      );
      const error = await within(
        5_000,
        oneShot(s, key).catch((e: unknown) => e),
      );
      expect(error).toMatchObject({ name: 'ContendedError' });
      expect((error as Error).cause).toMatchObject({ code: '55P03' }); // lock_not_available: the lock timeout
    } finally {
      await client.query('ROLLBACK').catch(() => undefined);
      await client.end().catch(() => undefined);
    }
    expect(await s.get(key)).toBeUndefined();
  });
});
