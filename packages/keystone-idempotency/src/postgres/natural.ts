import type { QueryResultRow } from 'pg';
import { InvalidNaturalRequestError, NaturalIdempotencyError } from '../engine/errors.js';
import type { Queryable } from './database.js';
import { quoteIdentifier } from './schema.js';
import type { PostgresStatement } from './store.js';

/**
 * Natural idempotency in SQL: operations safe to repeat by their own construction, with no key store, the three of
 * the documents, in the same shape as DynamoDB's (`keystone-idempotency/dynamodb`): the same names and results, each
 * input in its store's terms. Each is one statement (one round trip), and each but the first has a form to stage into an engine
 * commit. Tables and columns are quoted identifiers, values parameters: nothing given is ever read as SQL.
 *
 * - put-if-absent: `INSERT ... ON CONFLICT DO NOTHING`, for a row whose key comes from the request;
 * - compare-and-set: `UPDATE ... WHERE state = expected`, for a transition (`pending` → `paid`, version 3 → 4);
 * - upsert: `INSERT ... ON CONFLICT DO UPDATE` to fixed values, for "create or overwrite".
 */

type Row = Record<string, unknown>;

/** A table, optionally in a schema. */
export interface TableRef {
  readonly table: string;
  readonly schema?: string;
}

/** The column that says which of the statement's two answers a row is; never a column of the caller's table. */
const OUTCOME = '"keystone:outcome"';
const MAX_ROUNDS = 3;

function tableOf(ref: TableRef): string {
  return ref.schema === undefined
    ? quoteIdentifier(ref.table)
    : `${quoteIdentifier(ref.schema)}.${quoteIdentifier(ref.table)}`;
}

function columnsOf(values: Readonly<Row>, what: string): [string, unknown][] {
  const entries = Object.entries(values);
  for (const [column, value] of entries) {
    if (value === undefined) {
      throw new InvalidNaturalRequestError(`${what}: the value for ${column} is undefined; remove it or give a value`);
    }
  }
  return entries;
}

/** `"a" = $1 AND "b" = $2`, numbering from `first`. */
function matching(key: readonly [string, unknown][], first: number): string {
  return key.map(([column], i) => `${quoteIdentifier(column)} = $${first + i}`).join(' AND ');
}

function stripOutcome<T>(row: QueryResultRow): T {
  const { 'keystone:outcome': _outcome, ...rest } = row;
  return rest as T;
}

export interface PutIfAbsentInput extends TableRef {
  /** The whole row, key columns included. */
  readonly row: Readonly<Row>;
  /** The columns of the primary key (or of a unique constraint): the identity of "the same row". */
  readonly key: readonly [string, ...string[]];
}

/** `created`: this call inserted the row. `exists`: a row with this key was there, and is left as it was. */
export type PutIfAbsentResult<T extends Row = Row> =
  | { readonly kind: 'created'; readonly row: T }
  | { readonly kind: 'exists'; readonly row: T };

/**
 * Inserts a row only if none with its key exists: natural idempotency for "create" operations whose key is derived
 * from the request. Of any number of concurrent calls exactly one inserts (the others wait on the unique index for
 * it, then do nothing); every other call gets the stored row from the same statement.
 *
 * @example
 * const result = await putIfAbsent(pool, {
 *   table: 'orders',
 *   row: { id: 'ord_42', user_id: 7, amount: 1200 },
 *   key: ['id'],
 * });
 * if (result.kind === 'exists') log.info('already recorded', { amount: result.row.amount });
 */
export async function putIfAbsent<T extends Row = Row>(
  db: Queryable,
  input: PutIfAbsentInput,
): Promise<PutIfAbsentResult<T>> {
  const columns = columnsOf(input.row, 'putIfAbsent');
  const key = input.key.map((column): [string, unknown] => {
    if (input.row[column] === undefined) {
      throw new InvalidNaturalRequestError(`the row has no value for its key column ${column}`);
    }
    return [column, input.row[column]];
  });
  const table = tableOf(input);
  const text = `WITH created AS (
  INSERT INTO ${table} (${columns.map(([column]) => quoteIdentifier(column)).join(', ')})
  VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})
  ON CONFLICT (${key.map(([column]) => quoteIdentifier(column)).join(', ')}) DO NOTHING
  RETURNING *
)
SELECT 'created' AS ${OUTCOME}, * FROM created
UNION ALL
SELECT 'exists', * FROM ${table} WHERE ${matching(key, columns.length + 1)} AND NOT EXISTS (SELECT FROM created)`;
  const values = [...columns.map(([, value]) => value), ...key.map(([, value]) => value)];
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const { rows } = await db.query(text, values);
    const row = rows[0];
    // Nothing at all: the row that stopped us was committed after this statement's snapshot. Once more.
    if (row) return { kind: row['keystone:outcome'] as 'created' | 'exists', row: stripOutcome<T>(row) };
  }
  throw new NaturalIdempotencyError(`putIfAbsent: the row in ${table} kept appearing and disappearing`);
}

export interface CompareAndSetInput extends TableRef {
  /** The row's key: column → value. */
  readonly key: Readonly<Row>;
  /** The column that holds the state or version, e.g. `status` or `version`. Not a key column. */
  readonly column: string;
  /** The state the transition starts from. The row changes only if it holds exactly this value. */
  readonly expected: unknown;
  /** The state the transition ends in. */
  readonly next: unknown;
  /** Further columns to set with the transition, e.g. `{ paid_at: '2026-11-30T12:00:00Z' }`. */
  readonly set?: Readonly<Row>;
}

/**
 * `changed`: this call made the transition; `row` is the row after it. `unchanged`: the row did not hold `expected`
 * (a repeat finds it at `next` already; a competing transition finds another state), nothing was written, and `row`
 * is the row as it stands. `missing`: there is no row under this key, and none was created.
 */
export type CompareAndSetResult<T extends Row = Row> =
  | { readonly kind: 'changed'; readonly row: T }
  | { readonly kind: 'unchanged'; readonly row: T }
  | { readonly kind: 'missing' };

function transition(input: CompareAndSetInput): { update: string; values: unknown[]; key: [string, unknown][] } {
  if (input.expected === undefined || input.next === undefined) {
    throw new InvalidNaturalRequestError('compareAndSet needs both an expected and a next value');
  }
  const key = columnsOf(input.key, 'compareAndSet');
  if (key.length === 0) throw new InvalidNaturalRequestError('compareAndSet needs the row’s key');
  const extra = columnsOf(input.set ?? {}, 'compareAndSet');
  const keyColumns = new Set(key.map(([column]) => column));
  for (const column of [input.column, ...extra.map(([c]) => c)]) {
    if (keyColumns.has(column)) {
      throw new InvalidNaturalRequestError(`compareAndSet: ${column} is a key column; a transition never moves a row`);
    }
  }
  if (extra.some(([column]) => column === input.column)) {
    throw new InvalidNaturalRequestError(`set includes ${input.column}; the transition itself sets it`);
  }
  const assignments = [[input.column, input.next] as [string, unknown], ...extra];
  const values = [...assignments.map(([, value]) => value), input.expected, ...key.map(([, value]) => value)];
  const expectedAt = assignments.length + 1;
  const update = `UPDATE ${tableOf(input)}
   SET ${assignments.map(([column], i) => `${quoteIdentifier(column)} = $${i + 1}`).join(', ')}
 WHERE ${quoteIdentifier(input.column)} = $${expectedAt} AND ${matching(key, expectedAt + 1)}
 RETURNING *`;
  return { update, values, key };
}

/**
 * Moves one row from one state to the next, once: natural idempotency for state transitions and versions. The
 * first call changes the row; repeats, and all but one of any concurrent calls, change nothing and say so, together
 * with the row as it stands, in one statement.
 *
 * @example
 * const result = await compareAndSet(pool, {
 *   table: 'invoices',
 *   key: { id: 'inv_1' },
 *   column: 'status',
 *   expected: 'pending',
 *   next: 'paid',
 *   set: { paid_at: new Date() },
 * });
 * if (result.kind === 'unchanged' && result.row.status === 'paid') return; // a repeat: already done
 */
export async function compareAndSet<T extends Row = Row>(
  db: Queryable,
  input: CompareAndSetInput,
): Promise<CompareAndSetResult<T>> {
  const { update, values, key } = transition(input);
  const table = tableOf(input);
  const expectedAt = values.length - key.length;
  // The fallback read sees the statement's snapshot. If it still shows `expected`, the update waited for a
  // transition that committed meanwhile and found it changed: the row it shows is stale, so ask again.
  const text = `WITH changed AS (${update})
SELECT 'changed' AS ${OUTCOME}, * FROM changed
UNION ALL
SELECT CASE WHEN ${quoteIdentifier(input.column)} = $${expectedAt} THEN 'stale' ELSE 'unchanged' END, *
  FROM ${table} WHERE ${matching(key, expectedAt + 1)} AND NOT EXISTS (SELECT FROM changed)`;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const { rows } = await db.query(text, values);
    const row = rows[0];
    if (!row) return { kind: 'missing' };
    const kind = row['keystone:outcome'] as 'changed' | 'unchanged' | 'stale';
    if (kind !== 'stale') return { kind, row: stripOutcome<T>(row) };
  }
  throw new NaturalIdempotencyError(`compareAndSet: the row in ${table} kept changing under the transition`);
}

/**
 * The same transition as an effect to stage into an engine commit: the transition and the key's completion happen
 * together or not at all. If the row doesn't hold `expected` (or is missing), the whole commit is cancelled with
 * `EffectConditionFailedError`.
 *
 * @example
 * idempotency.stage(compareAndSetEffect({ table: 'payments', key: { id }, column: 'status', expected: 'succeeded', next: 'settled' }));
 */
export function compareAndSetEffect(input: CompareAndSetInput): PostgresStatement {
  const { update, values } = transition(input);
  return { text: update, values, expectRows: 1 };
}

export interface UpsertInput extends TableRef {
  /** The row's key: column → value (a primary key or unique constraint's columns). */
  readonly key: Readonly<Row>;
  /** Fixed values for the other columns. Columns not named here keep their values (or defaults, on insert). */
  readonly values: Readonly<Row>;
}

function upsertStatement(input: UpsertInput): { text: string; values: unknown[] } {
  const key = columnsOf(input.key, 'upsert');
  const values = columnsOf(input.values, 'upsert');
  if (key.length === 0) throw new InvalidNaturalRequestError('upsert needs the row’s key');
  if (values.length === 0) throw new InvalidNaturalRequestError('upsert needs at least one value to set');
  const keyColumns = new Set(key.map(([column]) => column));
  for (const [column] of values) {
    if (keyColumns.has(column)) throw new InvalidNaturalRequestError(`upsert: ${column} is a key column`);
  }
  const all = [...key, ...values];
  return {
    // Unconditional on purpose: every attempt converges on the same values, so there is no race to close.
    text: `INSERT INTO ${tableOf(input)} (${all.map(([column]) => quoteIdentifier(column)).join(', ')})
VALUES (${all.map((_, i) => `$${i + 1}`).join(', ')})
ON CONFLICT (${key.map(([column]) => quoteIdentifier(column)).join(', ')})
DO UPDATE SET ${values.map(([column]) => `${quoteIdentifier(column)} = EXCLUDED.${quoteIdentifier(column)}`).join(', ')}
RETURNING *`,
    values: all.map(([, value]) => value),
  };
}

/**
 * Sets columns to fixed values, inserting the row if needed: idempotent by construction, since applying the same
 * values twice leaves the row as applying them once. Returns the row as it stands afterwards.
 *
 * Only fixed values: `count = count + 1` is not idempotent and has no place here.
 *
 * @example
 * const profile = await upsert(pool, { table: 'profiles', key: { user_id: 7 }, values: { email: 'ada@example.com' } });
 */
export async function upsert<T extends Row = Row>(db: Queryable, input: UpsertInput): Promise<T> {
  const { text, values } = upsertStatement(input);
  const { rows } = await db.query(text, values);
  return rows[0] as T;
}

/** The same upsert as an effect to stage into an engine commit. */
export function upsertEffect(input: UpsertInput): PostgresStatement {
  return upsertStatement(input);
}
