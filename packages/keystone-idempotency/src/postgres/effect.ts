import type { Queryable } from './database.js';

/**
 * What a handler stages on PostgreSQL: SQL run inside the commit's transaction, after the key's fenced completion, so
 * it commits together with it or not at all.
 *
 * - A statement is sent without waiting (one round trip for the whole commit when the pool pipelines). With
 *   `expectRows`, the statement (which must end in `RETURNING`) has to return exactly that many rows, or the commit is
 *   cancelled with `EffectConditionFailedError`: a compare-and-set that found another state.
 * - A function is handed the transaction, for work that must read before it writes; it costs the round trips of
 *   its own queries. It may run more than once (the transaction is run again after a deadlock, a serialization
 *   failure or a lost connection): only its last run commits. Await every query it makes.
 *
 * An effect fails its own condition when PostgreSQL raises an integrity violation in it (a unique key already taken,
 * a foreign or check constraint) or its `expectRows` does not hold: nothing is written, and the commit throws
 * `EffectConditionFailedError` with the effect's index. Any other error is thrown as raised.
 */
export type PostgresEffect = PostgresStatement | ((tx: Queryable) => Promise<unknown>);

export interface PostgresStatement {
  readonly text: string;
  readonly values?: readonly unknown[];
  /** The number of rows the statement (ending in `RETURNING`) must return, or the commit is cancelled. */
  readonly expectRows?: number;
}
