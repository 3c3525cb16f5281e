import { EffectConditionFailedError } from '../engine/errors.js';
import { EXPECT_ROWS_SQLSTATE } from './schema.js';

/**
 * What PostgreSQL's errors mean to the store, translated in one place, by SQLSTATE (the `code` of pg's
 * `DatabaseError`): which ones a retry settles, which ones are an effect's own condition failing.
 */

/** The SQLSTATE of an error PostgreSQL raised, or undefined for anything else (a lost socket, a bug in an effect). */
export function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** serialization_failure, deadlock_detected: the transaction was rolled back whole, and may simply run again. */
export function isConflict(error: unknown): boolean {
  const state = sqlState(error);
  return state === '40001' || state === '40P01';
}

/** lock_not_available: a `lock_timeout` ran out while another transaction held the record. */
export function isLockTimeout(error: unknown): boolean {
  return sqlState(error) === '55P03';
}

/** in_failed_sql_transaction: a statement skipped because an earlier one in its transaction failed. */
export function isSkipped(error: unknown): boolean {
  return sqlState(error) === '25P02';
}

/**
 * pg's own errors about a connection that is gone (no SQLSTATE, no errno): a query sent on a client whose socket had
 * died, or one queued on it when it did. Whether a request already written on that connection landed is unknown.
 */
const DEAD_CLIENT_MESSAGES: readonly string[] = [
  'Connection terminated',
  'Connection terminated unexpectedly',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
];

/**
 * The server ended the session (an administrator, a failover) or the connection failed: whether the last request
 * landed is unknown. Sockets that die without a SQLSTATE are caught by the client's `error` event, and by pg's own
 * messages about a dead client, which carry no code at all.
 */
export function isConnectionFailure(error: unknown): boolean {
  const state = sqlState(error);
  if (state !== undefined) return state.startsWith('08') || ['57P01', '57P02', '57P03'].includes(state);
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code === 'string') return ['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT'].includes(code);
  return error instanceof Error && typeof message === 'string' && DEAD_CLIENT_MESSAGES.includes(message);
}

/** pg's per-query `query_timeout` ran out: the reply did not come in the time the call had left. */
export function isQueryTimeout(error: unknown): boolean {
  return error instanceof Error && sqlState(error) === undefined && error.message === 'Query read timeout';
}

/**
 * An effect that failed its own condition, as {@link EffectConditionFailedError}: a statement whose `expectRows`
 * did not hold, or an integrity constraint (class 23: a unique key already taken, a foreign key, a check).
 * Anything else is not a condition and is rethrown as it is.
 */
export function effectConditionFailure(error: unknown, index: number): EffectConditionFailedError | undefined {
  const state = sqlState(error);
  if (state === EXPECT_ROWS_SQLSTATE) {
    const detail = (error as { detail?: string }).detail;
    return new EffectConditionFailedError(index, detail ? JSON.parse(detail) : undefined, { cause: error });
  }
  if (state?.startsWith('23')) {
    const { constraint, table, detail } = error as { constraint?: string; table?: string; detail?: string };
    return new EffectConditionFailedError(index, { code: state, constraint, table, detail }, { cause: error });
  }
  return undefined;
}
