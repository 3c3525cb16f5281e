import { randomUUID } from 'node:crypto';
import { EffectConditionFailedError, InvalidNaturalRequestError } from '../../src/engine/errors';
import { scopedKey } from '../../src/engine/key';
import { compareAndSet, compareAndSetEffect, putIfAbsent, upsert, upsertEffect } from '../../src/postgres/natural';
import { testPostgres } from '../support/postgres';

/** The documents' three, in SQL: put-if-absent, compare-and-set on a state or version, upsert. Real PostgreSQL. */
const pg = testPostgres();
const schema = () => pg.schema;
const stored = { statusCode: 200, body: '{}', headers: {} };

beforeAll(async () => {
  await pg.pool.query(`CREATE TABLE "${schema()}".orders (
    id text PRIMARY KEY, amount integer NOT NULL, status text NOT NULL DEFAULT 'pending', version integer NOT NULL DEFAULT 1,
    "select" text, paid_at timestamptz)`);
});

const orders = () => ({ schema: schema(), table: 'orders' });

/**
 * Runs `sql` in a transaction of its own that stays open until `whileHeld` has started and waited a moment: a write
 * that waits for it, then finds what it committed, which the waiting statement's own snapshot cannot see.
 */
async function committedMeanwhile(sql: string, values: unknown[], whileHeld: () => Promise<unknown>) {
  const other = await pg.pool.connect();
  try {
    await other.query('BEGIN');
    await other.query(sql, values);
    const waiting = whileHeld();
    await new Promise((resolve) => setTimeout(resolve, 150));
    await other.query('COMMIT');
    return await waiting;
  } finally {
    other.release();
  }
}
const newOrder = () => `ord_${randomUUID()}`;

describe('putIfAbsent', () => {
  it('inserts an absent row, and returns it', async () => {
    const id = newOrder();
    const result = await putIfAbsent(pg.pool, { ...orders(), row: { id, amount: 1200 }, key: ['id'] });
    expect(result).toMatchObject({ kind: 'created', row: { id, amount: 1200, status: 'pending' } });
  });

  it('leaves an existing row as it is, and returns it from the same single statement', async () => {
    const id = newOrder();
    await putIfAbsent(pg.pool, { ...orders(), row: { id, amount: 1200 }, key: ['id'] });
    pg.roundTrips.reset();
    const again = await putIfAbsent(pg.pool, { ...orders(), row: { id, amount: 9999 }, key: ['id'] });
    expect(pg.roundTrips.count).toBe(1);
    expect(again).toMatchObject({ kind: 'exists', row: { id, amount: 1200 } });
    expect(Object.keys(again.row)).not.toContain('keystone:outcome');
  });

  it('lets exactly one of 20 concurrent inserts create the row, and shows every other caller the winner', async () => {
    const id = newOrder();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => putIfAbsent(pg.pool, { ...orders(), row: { id, amount: i }, key: ['id'] })),
    );
    const created = results.filter((result) => result.kind === 'created');
    expect(created).toHaveLength(1);
    const winner = created[0]?.row.amount;
    expect(results.filter((r) => r.kind === 'exists').map((r) => r.row.amount)).toEqual(Array(19).fill(winner));
  });

  it('finds a row inserted by a transaction it waited for, though its snapshot predates it', async () => {
    const id = newOrder();
    const result = await committedMeanwhile(`INSERT INTO "${schema()}".orders (id, amount) VALUES ($1, 7)`, [id], () =>
      putIfAbsent(pg.pool, { ...orders(), row: { id, amount: 1 }, key: ['id'] }),
    );
    expect(result).toMatchObject({ kind: 'exists', row: { id, amount: 7 } });
  });

  it('takes every name literally: a column called select, a table name with a quote in it', async () => {
    await pg.pool.query(`CREATE TABLE "${schema()}"."odd""name" (id text PRIMARY KEY, "select" text)`);
    const result = await putIfAbsent(pg.pool, {
      schema: schema(),
      table: 'odd"name',
      row: { id: 'x', select: "'; DROP TABLE orders; --" },
      key: ['id'],
    });
    expect(result).toMatchObject({ kind: 'created', row: { select: "'; DROP TABLE orders; --" } });
  });

  it('refuses a row without a value for its key', async () => {
    await expect(putIfAbsent(pg.pool, { ...orders(), row: { amount: 1 }, key: ['id'] })).rejects.toBeInstanceOf(
      InvalidNaturalRequestError,
    );
  });
});

describe('compareAndSet', () => {
  async function order(status = 'pending') {
    const id = newOrder();
    await pg.pool.query(`INSERT INTO "${schema()}".orders (id, amount, status) VALUES ($1, 100, $2)`, [id, status]);
    return id;
  }
  const pay = (id: string) => ({
    ...orders(),
    key: { id },
    column: 'status',
    expected: 'pending',
    next: 'paid',
    set: { paid_at: new Date(Date.UTC(2026, 10, 30)) },
  });

  it('moves a row from the expected state to the next, once: 1 row the first time, 0 on every repeat', async () => {
    const id = await order();
    const first = await compareAndSet(pg.pool, pay(id));
    expect(first).toMatchObject({
      kind: 'changed',
      row: { status: 'paid', paid_at: new Date(Date.UTC(2026, 10, 30)) },
    });
    pg.roundTrips.reset();
    const repeat = await compareAndSet(pg.pool, pay(id));
    expect(pg.roundTrips.count).toBe(1);
    expect(repeat).toMatchObject({ kind: 'unchanged', row: { status: 'paid' } });
  });

  it('compares and sets a version number', async () => {
    const id = await order();
    const bump = (expected: number) => ({ ...orders(), key: { id }, column: 'version', expected, next: expected + 1 });
    expect((await compareAndSet(pg.pool, bump(1))).kind).toBe('changed');
    expect(await compareAndSet(pg.pool, bump(1))).toMatchObject({ kind: 'unchanged', row: { version: 2 } });
    expect((await compareAndSet(pg.pool, bump(2))).kind).toBe('changed');
  });

  it('says missing, and creates nothing, for a row that is not there', async () => {
    expect(await compareAndSet(pg.pool, pay(newOrder()))).toEqual({ kind: 'missing' });
  });

  it('lets one of 20 concurrent transitions win; the others see the row as the winner left it', async () => {
    const id = await order();
    const results = await Promise.all(Array.from({ length: 20 }, () => compareAndSet(pg.pool, pay(id))));
    expect(results.filter((r) => r.kind === 'changed')).toHaveLength(1);
    for (const result of results.filter((r) => r.kind !== 'changed')) {
      expect(result).toMatchObject({ kind: 'unchanged', row: { status: 'paid' } });
    }
  });

  it('shows the row as a transition it waited for left it, not as its snapshot saw it', async () => {
    const id = await order();
    const result = await committedMeanwhile(`UPDATE "${schema()}".orders SET status = 'paid' WHERE id = $1`, [id], () =>
      compareAndSet(pg.pool, pay(id)),
    );
    expect(result).toMatchObject({ kind: 'unchanged', row: { status: 'paid' } });
  });

  it('refuses to move a key column, or to set the state column twice', async () => {
    await expect(compareAndSet(pg.pool, { ...pay('x'), column: 'id' })).rejects.toBeInstanceOf(
      InvalidNaturalRequestError,
    );
    await expect(compareAndSet(pg.pool, { ...pay('x'), set: { status: 'other' } })).rejects.toBeInstanceOf(
      InvalidNaturalRequestError,
    );
  });

  describe('as an effect of a commit', () => {
    it('makes the transition together with the key’s completion', async () => {
      const id = await order();
      const s = pg.store();
      const outcome = await s.claimAndCommit(
        scopedKey({ accountId: 'a', operation: 'pay', key: id }),
        'fp',
        async () => ({
          response: stored,
          effects: [compareAndSetEffect(pay(id))],
        }),
      );
      expect(outcome.kind).toBe('committed');
      expect((await compareAndSet(pg.pool, pay(id))).kind).toBe('unchanged');
    });

    it('cancels the whole commit when the row is not in the expected state', async () => {
      const id = await order('refunded');
      const s = pg.store();
      const key = scopedKey({ accountId: 'a', operation: 'pay', key: id });
      const error = await s
        .claimAndCommit(key, 'fp', async () => ({
          response: stored,
          effects: [
            upsertEffect({ ...orders(), key: { id: newOrder() }, values: { amount: 1 } }),
            compareAndSetEffect(pay(id)),
          ],
        }))
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(EffectConditionFailedError);
      expect(error).toMatchObject({ index: 1, item: { expected: 1, actual: 0 } });
      expect(await s.get(key)).toBeUndefined();
    });
  });
});

describe('upsert', () => {
  it('inserts a row, then sets the same values again and again with the same result', async () => {
    const id = newOrder();
    const input = { ...orders(), key: { id }, values: { amount: 500, status: 'paid' } };
    const first = await upsert(pg.pool, input);
    expect(first).toMatchObject({ id, amount: 500, status: 'paid', version: 1 });
    expect(await upsert(pg.pool, input)).toEqual(first);
  });

  it('leaves the columns it does not name as they are', async () => {
    const id = newOrder();
    await upsert(pg.pool, { ...orders(), key: { id }, values: { amount: 1, status: 'paid' } });
    expect(await upsert(pg.pool, { ...orders(), key: { id }, values: { amount: 2 } })).toMatchObject({
      amount: 2,
      status: 'paid',
    });
  });

  it('refuses to set a key column, or nothing at all', async () => {
    await expect(upsert(pg.pool, { ...orders(), key: { id: 'x' }, values: { id: 'y' } })).rejects.toBeInstanceOf(
      InvalidNaturalRequestError,
    );
    await expect(upsert(pg.pool, { ...orders(), key: { id: 'x' }, values: {} })).rejects.toBeInstanceOf(
      InvalidNaturalRequestError,
    );
  });
});
