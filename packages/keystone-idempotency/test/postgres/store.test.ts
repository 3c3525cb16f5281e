import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { OneShotOutcome } from '../../src/engine/contract';
import {
  ConfigurationError,
  ContendedError,
  EffectConditionFailedError,
  EffectKindError,
  IdempotencyError,
} from '../../src/engine/errors';
import { scopedKey } from '../../src/engine/key';
import { makeIdempotent } from '../../src/engine/make-idempotent';
import type { IdempotencyHandle } from '../../src/engine/operation';
import { type Lease, RecordStatus, type StoredResponse } from '../../src/engine/record';
import type { Queryable } from '../../src/postgres/database';
import { migrate } from '../../src/postgres/migrate';
import type { PostgresEffect, PostgresStore } from '../../src/postgres/store';
import { FakeClock } from '../support/fake-clock';
import { testPostgres } from '../support/postgres';

/**
 * What is particular to PostgreSQL: round trips (pipelining), the waits a transaction makes on another, deadlocks
 * and serialization failures, SQL effects. The protocol itself is the contract suite's (test/engine), run on both
 * stores; lost replies on the wire are test/postgres/lost-replies.test.ts.
 */
const pg = testPostgres();

const created: StoredResponse = {
  statusCode: 201,
  body: '{"id":"pay_1"}',
  headers: { 'Content-Type': 'application/json' },
};
const newKey = () => scopedKey({ accountId: 'acct_pg', operation: 'POST /payments', key: randomUUID() });
const row = (pk: string, sk: string): PostgresEffect => ({
  text: `INSERT INTO ${pg.effectsTable} (pk, sk) VALUES ($1, $2)`,
  values: [pk, sk],
});

async function acquire(s: PostgresStore, key: string, options = {}): Promise<Lease> {
  const outcome = await s.claim(key, 'fp', options);
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

/** Counts the round trips of `run`, on the file's pipelining pool (its connections are already open). */
async function roundTripsOf(run: () => Promise<unknown>): Promise<number> {
  pg.roundTrips.reset();
  await run();
  return pg.roundTrips.count;
}

/** A promise a test resolves when it chooses: holds a transaction open at a known point. */
function gate(): { opened: Promise<void>; open(): void } {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

describe('round trips, with a pipelining pool', () => {
  it('is one for a first claim, one for an in-flight duplicate, one for a replay', async () => {
    const s = pg.store();
    const key = newKey();
    let lease: Lease | undefined;
    expect(await roundTripsOf(async () => (lease = await acquire(s, key)))).toBe(1);
    expect(await roundTripsOf(() => s.claim(key, 'fp'))).toBe(1);
    await s.commit(lease!, created);
    expect(await roundTripsOf(() => s.claim(key, 'fp'))).toBe(1);
  });

  it('is one for a commit with statements: BEGIN, the fenced completion, the statements and COMMIT together', async () => {
    const s = pg.store();
    const key = newKey();
    const lease = await acquire(s, key);
    expect(await roundTripsOf(() => s.commit(lease, created, [row(key, 'a'), row(key, 'b'), row(key, 'c')]))).toBe(1);
    expect(await pg.rowsUnder(key)).toBe(3);
  });

  it('is one for a commit with nothing staged, and one for a takeover after a release', async () => {
    const s = pg.store();
    const key = newKey();
    const lease = await acquire(s, key);
    expect(await roundTripsOf(() => s.release(lease))).toBe(1);
    // A claim that meets a released record: the failed fresh claim, then the takeover.
    let taken: Lease | undefined;
    expect(await roundTripsOf(async () => (taken = await acquire(s, key)))).toBe(2);
    expect(await roundTripsOf(() => s.commit(taken!, created))).toBe(1);
  });

  it('adds the round trips a function effect waits for, and no more', async () => {
    const s = pg.store();
    const key = newKey();
    const lease = await acquire(s, key);
    const readThenWrite = async (tx: Queryable) => {
      const { rows } = await tx.query<{ n: string }>(`SELECT count(*) AS n FROM ${pg.effectsTable} WHERE pk = $1`, [
        key,
      ]);
      await tx.query(`INSERT INTO ${pg.effectsTable} (pk, sk) VALUES ($1, $2)`, [key, `after-${rows[0]?.n}`]);
    };
    // The function's SELECT goes out with BEGIN and the completion; its INSERT after the reply; COMMIT after that.
    expect(await roundTripsOf(() => s.commit(lease, created, [row(key, 'first'), readThenWrite]))).toBe(3);
    expect(await pg.rowsUnder(key)).toBe(2);
  });

  it('is one for a one-shot local commit, and one for its duplicate, which replays', async () => {
    const s = pg.store();
    const key = newKey();
    const build = (sk: string) => async () => ({ response: created, effects: [row(key, sk)] });
    let first: OneShotOutcome | undefined;
    expect(await roundTripsOf(async () => (first = await s.claimAndCommit(key, 'fp', build('1'))))).toBe(1);
    expect(first?.kind).toBe('committed');
    let again: OneShotOutcome | undefined;
    expect(await roundTripsOf(async () => (again = await s.claimAndCommit(key, 'fp', build('2'))))).toBe(1);
    expect(again).toMatchObject({ kind: 'replay', response: created });
    expect(await pg.rowsUnder(key)).toBe(1);
  });
});

describe('a pool that does not pipeline', () => {
  let plain: Pool;
  beforeAll(() => {
    plain = pg.pool2({ max: 2 });
  });

  it('keeps every promise, one statement at a time', async () => {
    const s = pg.store({ pool: plain });
    const key = newKey();
    const lease = await acquire(s, key);
    await s.commit(lease, created, [row(key, 'a'), row(key, 'b')]);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
    await expect(s.commit(lease, created, [row(key, 'late')])).resolves.toBeUndefined(); // its own completion
    const failing = await acquire(s, newKey());
    const error = await s.commit(failing, created, [row(key, 'c'), row(key, 'a')]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EffectConditionFailedError);
    expect(error).toMatchObject({ index: 1 });
    expect(await pg.rowsUnder(key)).toBe(2);
    const oneShot = newKey();
    const build = async () => ({ response: created, effects: [row(oneShot, 'x')] });
    expect((await s.claimAndCommit(oneShot, 'fp', build)).kind).toBe('committed');
    expect((await s.claimAndCommit(oneShot, 'fp', build)).kind).toBe('replay');
  });
});

describe('effects', () => {
  it('run after the fenced completion, in its transaction: a function sees the record completed', async () => {
    const s = pg.store();
    const key = newKey();
    const lease = await acquire(s, key);
    let seen: string | undefined;
    await s.commit(lease, created, [
      async (tx) => {
        const { rows } = await tx.query<{ status: string }>(
          `SELECT status FROM "${pg.schema}".idempotency_keys WHERE lease_token = $1`,
          [lease.leaseToken],
        );
        seen = rows[0]?.status;
      },
    ]);
    expect(seen).toBe(RecordStatus.Completed);
  });

  it('name the constraint an effect broke, and write nothing', async () => {
    const s = pg.store();
    const key = newKey();
    await pg.pool.query(`INSERT INTO ${pg.effectsTable} (pk, sk) VALUES ($1, 'taken')`, [key]);
    const lease = await acquire(s, key);
    const error = await s.commit(lease, created, [row(key, 'new'), row(key, 'taken')]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EffectConditionFailedError);
    expect(error).toMatchObject({ index: 1, item: { code: '23505', constraint: 'effects_pkey' } });
    expect(await pg.rowsUnder(key)).toBe(1);
    expect((await s.claim(key, 'fp')).kind).toBe('in_flight');
  });

  it('cancel the commit when a statement with expectRows returns another number of rows', async () => {
    const s = pg.store();
    const key = newKey();
    const lease = await acquire(s, key);
    const noSuchRow: PostgresEffect = {
      text: `UPDATE ${pg.effectsTable} SET sk = sk WHERE pk = $1 RETURNING 1`,
      values: [`missing-${randomUUID()}`],
      expectRows: 1,
    };
    const error = await s.commit(lease, created, [row(key, 'p'), noSuchRow]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EffectConditionFailedError);
    expect(error).toMatchObject({ index: 1, item: { effect: 1, expected: 1, actual: 0 } });
    expect(await pg.rowsUnder(key)).toBe(0);
  });

  it('take expectRows 0 and a statement without values, and refuse expectRows that is no whole number of rows', async () => {
    const s = pg.store();
    const key = newKey();
    const lease = await acquire(s, key);
    const none: PostgresEffect = { text: `SELECT 1 FROM ${pg.effectsTable} WHERE false`, expectRows: 0 };
    for (const expectRows of [-1, 0.5]) {
      const wrong = { ...none, expectRows };
      await expect(s.commit(lease, created, [row(key, 'p'), wrong])).rejects.toBeInstanceOf(ConfigurationError);
      expect(await pg.rowsUnder(key)).toBe(0);
    }
    await s.commit(lease, created, [row(key, 'p'), none, { text: 'SELECT 1' }]);
    expect(await pg.rowsUnder(key)).toBe(1);
  });

  it('pass on an error that is not a condition as it is, writing nothing', async () => {
    const s = pg.store();
    const key = newKey();
    const lease = await acquire(s, key);
    const broken: PostgresEffect = { text: 'SELEC 1' };
    await expect(s.commit(lease, created, [row(key, 'p'), broken])).rejects.toMatchObject({ code: '42601' });
    const failing = new Error('the handler’s own bug');
    await expect(
      s.commit(lease, created, [
        row(key, 'p'),
        async () => {
          throw failing;
        },
      ]),
    ).rejects.toBe(failing);
    expect(await pg.rowsUnder(key)).toBe(0);
    expect((await s.claim(key, 'fp')).kind).toBe('in_flight');
  });

  it('refuse to call a commit done when a function swallowed the error that rolled it back', async () => {
    const s = pg.store();
    const key = newKey();
    const lease = await acquire(s, key);
    const swallowing = async (tx: Queryable) => {
      await tx.query('SELECT 1/0').catch(() => undefined);
    };
    await expect(s.commit(lease, created, [row(key, 'p'), swallowing])).rejects.toBeInstanceOf(IdempotencyError);
    expect(await pg.rowsUnder(key)).toBe(0);
    expect((await s.claim(key, 'fp')).kind).toBe('in_flight');
  });
});

describe('an effect that is not a PostgreSQL effect', () => {
  /** A DynamoDB transaction item, handed over by a JavaScript caller or through a cast. */
  const item = { Put: { TableName: 'payments', Item: { pk: 'a', sk: 'b' } } } as unknown as PostgresEffect;

  it('is refused by commit before anything is sent, and the key is then released, not stuck', async () => {
    const s = pg.store();
    const key = newKey();
    const lease = await acquire(s, key);
    let error: unknown;
    expect(
      await roundTripsOf(async () => {
        error = await s.commit(lease, created, [row(key, 'p'), item]).catch((e: unknown) => e);
      }),
    ).toBe(0);
    expect(error).toBeInstanceOf(EffectKindError);
    expect(error).toMatchObject({
      index: 1,
      message: expect.stringContaining('it has Put (a DynamoDB transaction item, for a DynamoDB store?)'),
    });
    expect(await pg.rowsUnder(key)).toBe(0);
    expect((await s.get(key))?.status).toBe(RecordStatus.InProgress);
    expect(await s.release(lease)).toBe(true);
    expect((await s.get(key))?.status).toBe(RecordStatus.Released);
  });

  it('is refused by a one-shot commit before anything is sent: the key stays free', async () => {
    const s = pg.store();
    const key = newKey();
    let error: unknown;
    expect(
      await roundTripsOf(async () => {
        error = await s
          .claimAndCommit(key, 'fp', async () => ({ response: created, effects: [row(key, 'p'), item] }))
          .catch((e: unknown) => e);
      }),
    ).toBe(0);
    expect(error).toBeInstanceOf(EffectKindError);
    expect(await s.get(key)).toBeUndefined();
  });

  it('is told apart from a statement or an effect function by checkEffect, which names what is wrong (any DynamoDB action)', () => {
    const s = pg.store();
    for (const good of [{ text: 'SELECT 1' }, { text: 'SELECT $1', values: [1], expectRows: 1 }, async () => 1]) {
      expect(() => s.checkEffect(good, 0)).not.toThrow();
    }
    const refusals: [unknown, string][] = [
      [{ Update: { TableName: 'payments' } }, 'it has Update (a DynamoDB transaction item'],
      [{ Delete: { TableName: 'payments' } }, 'it has Delete (a DynamoDB transaction item'],
      [{ ConditionCheck: { TableName: 'payments' } }, 'it has ConditionCheck (a DynamoDB transaction item'],
      [{ text: '' }, 'it has no SQL `text`'],
      [{ text: ' \n\t ' }, 'it has no SQL `text`'],
      [[{ text: 'SELECT 1' }], 'it is an array'],
      [{ values: [1] }, 'it has no SQL `text`'],
      [{ text: 'SELECT $1', values: 1 }, 'its `values` is not an array'],
      ['SELECT 1', 'it is string'],
      [null, 'it is null'],
    ];
    for (const [effect, reason] of refusals) {
      expect(() => s.checkEffect(effect, 2)).toThrow(`effect 2 is not a PostgreSQL effect`);
      expect(() => s.checkEffect(effect, 2)).toThrow(reason);
    }
  });
});

describe('a database error in a write', () => {
  /**
   * A table of its own whose CHECK refuses a third attempt, a response of status 599 and a fifth checkpoint: each
   * write meets an error of the database, not its fence, and must pass it on as it is, never answer in flight or
   * take it for a lost lease.
   */
  async function refusingStore(): Promise<PostgresStore> {
    const table = `keys_${randomUUID().replaceAll('-', '').slice(0, 8)}`;
    await migrate(pg.pool, { schema: pg.schema, table });
    await pg.pool.query(
      `ALTER TABLE "${pg.schema}"."${table}" ADD CONSTRAINT refuses CHECK (attempt < 3 AND response_status IS DISTINCT FROM 599 AND coalesce(step_revision, 0) < 5)`,
    );
    return pg.store({ table });
  }
  const violation = { code: '23514', constraint: 'refuses' };

  it('is passed on by a claim (a takeover)', async () => {
    const s = await refusingStore();
    const key = newKey();
    await s.release(await acquire(s, key));
    await s.release(await acquire(s, key));
    await expect(s.claim(key, 'fp')).rejects.toMatchObject(violation);
  });

  it('is passed on by a commit, with effects or without, which writes nothing', async () => {
    const s = await refusingStore();
    for (const effects of [[], [row(randomUUID(), 'p')]]) {
      const key = newKey();
      const lease = await acquire(s, key);
      await expect(s.commit(lease, { ...created, statusCode: 599 }, effects)).rejects.toMatchObject(violation);
      expect((await s.claim(key, 'fp')).kind).toBe('in_flight');
    }
  });

  it('is passed on by a checkpoint, with effects or without', async () => {
    const s = await refusingStore();
    const done = { name: 'a', state: 'done', attempt: 1, at: 1 } as const;
    for (const effects of [[], [row(randomUUID(), 'p')]]) {
      const lease = await acquire(s, newKey());
      for (let revision = 1; revision < 5; revision++) await s.checkpoint!(lease, { revision, steps: [done] });
      await expect(s.checkpoint!(lease, { revision: 5, steps: [done] }, effects)).rejects.toMatchObject(violation);
    }
  });
});

describe("a one-shot commit's lock timeout", () => {
  /** A one-shot whose function effect reports the lock timeout its statements run under. */
  async function effectsLockTimeout(s: PostgresStore, key: string): Promise<string | undefined> {
    let seen: string | undefined;
    const outcome = await s.claimAndCommit(key, 'fp', async () => ({
      response: created,
      effects: [
        async (tx) => {
          const { rows } = await tx.query<{ lock_timeout: string }>('SHOW lock_timeout');
          seen = rows[0]?.lock_timeout;
        },
      ],
    }));
    expect(outcome.kind).toBe('committed');
    return seen;
  }

  // The claim's write waits on a concurrent duplicate for the store's lock timeout at most; the effects after it
  // wait as the session would (the role's, the database's or the connection's setting), not for the claim's.
  it('bounds the claim alone: the effects run under the lock timeout the session had, fresh key or takeover', async () => {
    const session = pg.pool2({ pipeline: true, options: '-c lock_timeout=4321' });
    const s = pg.store({ pool: session, lockTimeoutMs: 200 });
    const fresh = newKey();
    expect(await effectsLockTimeout(s, fresh)).toBe('4321ms');
    const released = newKey();
    expect(await s.release(await acquire(s, released))).toBe(true);
    expect(await effectsLockTimeout(s, released)).toBe('4321ms');
    expect((await session.query<{ lock_timeout: string }>('SHOW lock_timeout')).rows[0]?.lock_timeout).toBe('4321ms');
  });
});

describe('a one-shot commit racing another transaction on its key', () => {
  /** A one-shot whose transaction holds its key until `held` opens: its function effect waits for it. */
  function slowOneShot(s: PostgresStore, key: string, held: Promise<void>, running: () => void) {
    return s.claimAndCommit(key, 'fp', async () => ({
      response: created,
      effects: [
        row(key, 'original'),
        async (tx) => {
          await tx.query('SELECT 1'); // answered after the claim and the row: the key is held from here
          running();
          await held;
        },
      ],
    }));
  }

  it('waits on the primary key until the original commits, then replays it', async () => {
    const s = pg.store();
    const key = newKey();
    const release = gate();
    const running = gate();
    const original = slowOneShot(s, key, release.opened, running.open);
    await running.opened;
    const startedAt = Date.now();
    const duplicate = s.claimAndCommit(key, 'fp', async () => ({ response: created, effects: [row(key, 'dup')] }));
    setTimeout(release.open, 300);
    expect((await original).kind).toBe('committed');
    expect(await duplicate).toMatchObject({ kind: 'replay', response: created });
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(250);
    expect(await pg.rowsUnder(key)).toBe(1);
  });

  it('gives up after its lock timeout while the original has not committed: contended, nothing written', async () => {
    const s = pg.store({ lockTimeoutMs: 200 });
    const key = newKey();
    const release = gate();
    const running = gate();
    const original = slowOneShot(s, key, release.opened, running.open);
    await running.opened;
    const startedAt = Date.now();
    const duplicate = await s
      .claimAndCommit(key, 'fp', async () => ({ response: created, effects: [row(key, 'dup')] }))
      .catch((e: unknown) => e);
    const waited = Date.now() - startedAt;
    release.open();
    expect((await original).kind).toBe('committed');
    // The original's record is not visible until it commits: there is nothing to answer "in flight" with.
    expect(duplicate).toBeInstanceOf(ContendedError);
    expect(waited).toBeGreaterThanOrEqual(190);
    expect(waited).toBeLessThan(2000);
    expect(await pg.rowsUnder(key)).toBe(1);
  });

  it('answers in flight after its lock timeout while a two-phase owner is committing', async () => {
    const s = pg.store({ lockTimeoutMs: 200 });
    const key = newKey();
    const lease = await acquire(s, key);
    const release = gate();
    const running = gate();
    const commit = s.commit(lease, created, [
      async (tx) => {
        await tx.query('SELECT 1');
        running.open();
        await release.opened;
      },
    ]);
    await running.opened;
    const duplicate = await s.claimAndCommit(key, 'fp', async () => ({ response: created, effects: [row(key, 'x')] }));
    release.open();
    await commit;
    expect(duplicate).toMatchObject({ kind: 'in_flight', record: { leaseToken: lease.leaseToken } });
    expect(await s.claimAndCommit(key, 'fp', async () => ({ response: created, effects: [] }))).toMatchObject({
      kind: 'replay',
    });
  });
});

describe('deadlocks and serialization failures', () => {
  beforeAll(async () => {
    await pg.pool.query(`CREATE TABLE "${pg.schema}".accounts (id text PRIMARY KEY, balance integer NOT NULL)`);
  });

  const credit = (id: string) => ({
    text: `UPDATE "${pg.schema}".accounts SET balance = balance + 1 WHERE id = $1`,
    values: [id],
  });

  it('runs a commit chosen as a deadlock victim again, so both commits land, each effect once', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await pg.pool.query(`INSERT INTO "${pg.schema}".accounts VALUES ($1, 0), ($2, 0)`, [a, b]);
    const s = pg.store();
    const [first, second] = [await acquire(s, newKey()), await acquire(s, newKey())];
    const bothHoldOne = { count: 0, both: gate() };
    let runs = 0;
    /** Locks one account, waits until the other commit holds the other, then wants that one too. */
    const crossing = (mine: string, theirs: string) => async (tx: Queryable) => {
      runs += 1;
      await tx.query(credit(mine).text, credit(mine).values);
      if (++bothHoldOne.count === 2) bothHoldOne.both.open();
      await bothHoldOne.both.opened;
      await tx.query(credit(theirs).text, credit(theirs).values);
    };
    await Promise.all([s.commit(first, created, [crossing(a, b)]), s.commit(second, created, [crossing(b, a)])]);
    expect(runs).toBe(3); // the victim's function ran again
    const { rows } = await pg.pool.query(`SELECT balance FROM "${pg.schema}".accounts WHERE id IN ($1, $2)`, [a, b]);
    expect(rows.map((r) => r.balance)).toEqual([2, 2]);
  });

  it('runs a commit again after a serialization failure under repeatable read', async () => {
    const id = randomUUID();
    await pg.pool.query(`INSERT INTO "${pg.schema}".accounts VALUES ($1, 0)`, [id]);
    const repeatable = pg.pool2({ pipeline: true, options: '-c default_transaction_isolation=repeatable\\ read' });
    const s = pg.store({ pool: repeatable });
    const lease = await acquire(s, newKey());
    let runs = 0;
    await s.commit(lease, created, [
      async (tx) => {
        runs += 1;
        if (runs === 1) {
          // Its snapshot is taken; someone else credits the account and commits; then it writes the same row.
          await tx.query('SELECT 1');
          await pg.pool.query(credit(id).text, credit(id).values);
        }
        await tx.query(credit(id).text, credit(id).values);
      },
    ]);
    expect(runs).toBe(2);
    const { rows } = await pg.pool.query(`SELECT balance FROM "${pg.schema}".accounts WHERE id = $1`, [id]);
    expect(rows[0].balance).toBe(2);
  });

  it('runs a one-shot again after a serialization failure, and it replays the original', async () => {
    // Under serializable isolation a duplicate that waited on the original's insert then finds a row its snapshot
    // cannot see: PostgreSQL refuses with 40001. The store runs it again, and the new snapshot sees the original.
    const serializable = pg.pool2({ pipeline: true, options: '-c default_transaction_isolation=serializable' });
    for (const conflictAttempts of [1, 5]) {
      const s = pg.store({ pool: serializable, conflictAttempts });
      const key = newKey();
      const release = gate();
      const running = gate();
      const original = s.claimAndCommit(key, 'fp', async () => ({
        response: created,
        effects: [
          async (tx) => {
            await tx.query('SELECT 1');
            running.open();
            await release.opened;
          },
        ],
      }));
      await running.opened;
      const duplicate = s
        .claimAndCommit(key, 'fp', async () => ({ response: created, effects: [row(key, 'dup')] }))
        .catch((e: unknown) => e);
      setTimeout(release.open, 100);
      expect((await original).kind).toBe('committed');
      if (conflictAttempts === 1) expect(await duplicate).toMatchObject({ code: '40001' });
      else expect(await duplicate).toMatchObject({ kind: 'replay', response: created });
      expect(await pg.rowsUnder(key)).toBe(0);
    }
  });
});

describe('the engine’s adapters on PostgreSQL', () => {
  it('run a function once per key with makeIdempotent, its SQL committed with the key, its result replayed', async () => {
    const s = pg.store();
    let runs = 0;
    const ship = makeIdempotent(
      async (order: { orderId: string }, idempotency: IdempotencyHandle<PostgresEffect>) => {
        runs += 1;
        idempotency.stage(row(order.orderId, idempotency.downstreamKey));
        return { shipped: order.orderId, attempt: idempotency.attempt };
      },
      { store: s, name: 'ship', key: (order) => order.orderId },
    );
    const order = { orderId: `ord_${randomUUID()}` };
    const first = await ship(order);
    expect(await ship(order)).toEqual(first);
    expect(runs).toBe(1);
    expect(await pg.rowsUnder(order.orderId)).toBe(1);
  });

  it('write nothing of a run that threw, and take the key over on the next call, same downstream key', async () => {
    const s = pg.store();
    const keys: string[] = [];
    let fail = true;
    const ship = makeIdempotent(
      async (order: { orderId: string }, idempotency: IdempotencyHandle<PostgresEffect>) => {
        keys.push(idempotency.downstreamKey);
        idempotency.stage(row(order.orderId, `attempt-${idempotency.attempt}`));
        if (fail) throw new Error('the carrier is down');
        return 'shipped';
      },
      { store: s, name: 'ship', key: (order) => order.orderId },
    );
    const order = { orderId: `ord_${randomUUID()}` };
    await expect(ship(order)).rejects.toThrow('the carrier is down');
    expect(await pg.rowsUnder(order.orderId)).toBe(0);
    fail = false;
    expect(await ship(order)).toBe('shipped');
    expect(new Set(keys).size).toBe(1);
    expect(await pg.rowsUnder(order.orderId)).toBe(1);
  });
});

describe('purgeExpired', () => {
  it('deletes rows past their expiry in batches, and nothing live', async () => {
    await migrate(pg.pool, { schema: pg.schema, table: 'purged_keys' }); // a table of its own: nothing else expires
    const clock = new FakeClock();
    const s = pg.store({ clock, ttlSeconds: 60, table: 'purged_keys' });
    const old = await Promise.all(
      Array.from({ length: 5 }, async () => {
        const key = newKey();
        await s.commit(await acquire(s, key), created);
        return key;
      }),
    );
    clock.advance(61_000);
    const live = newKey();
    await s.commit(await acquire(s, live), created);
    expect(await s.purgeExpired({ batchSize: 2 })).toBe(5);
    const { rows } = await pg.pool.query(
      `SELECT count(*)::int AS n FROM "${pg.schema}".purged_keys WHERE expires_at <= $1`,
      [new Date(clock.now())],
    );
    expect(rows[0].n).toBe(0);
    for (const key of old) expect(await s.get(key)).toBeUndefined();
    expect((await s.get(live))?.status).toBe(RecordStatus.Completed);
  });
});

describe('prepared statements', () => {
  it("prepares the store's own statements once per connection, and never an effect's SQL", async () => {
    const one = pg.pool2({ max: 1, pipeline: true });
    const s = pg.store({ pool: one });
    const prepared = async () =>
      (await one.query<{ statement: string }>('SELECT statement FROM pg_prepared_statements')).rows.map(
        (r) => r.statement,
      );
    for (let i = 0; i < 3; i++) {
      const key = newKey();
      const lease = await acquire(s, key);
      await s.commit(lease, created, [row(key, 'ITEM')]);
      expect((await s.claim(key, 'fp')).kind).toBe('replay');
      expect((await s.claimAndCommit(newKey(), 'fp', async () => ({ response: created, effects: [] }))).kind).toBe(
        'committed',
      );
    }
    const statements = await prepared();
    // The claim, the completion, the bounds and the one-shot commit: each prepared once however often it ran.
    expect(statements.filter((text) => text.includes('INSERT INTO') && text.includes('seen AS'))).toHaveLength(1);
    expect(statements.filter((text) => text.includes('WITH done AS'))).toHaveLength(1);
    expect(new Set(statements).size).toBe(statements.length);
    expect(statements.some((text) => text.includes(pg.effectsTable))).toBe(false);
  });

  it('prepares nothing with prepareStatements: false (for a pooler that does not carry them)', async () => {
    const one = pg.pool2({ max: 1, pipeline: true });
    const s = pg.store({ pool: one, prepareStatements: false });
    const key = newKey();
    await s.commit(await acquire(s, key), created, [row(key, 'ITEM')]);
    expect((await s.claim(key, 'fp')).kind).toBe('replay');
    const { rows } = await one.query('SELECT statement FROM pg_prepared_statements');
    expect(rows).toEqual([]);
  });
});
