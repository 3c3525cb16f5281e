import { splitScopedKey } from '../engine/key.js';
import { type IdempotencyRecord, type Lease, RecordStatus, type StoredResponse } from '../engine/record.js';
import type { StepProgress } from '../engine/steps.js';
import { responseColumns } from './codec.js';
import type { Statement } from './database.js';
import { recordJson, type TableNames } from './schema.js';

/**
 * The statements of the fencing rule, in SQL. Each comment says the invariant its condition keeps; the store decides
 * when each one is sent. The conditions are DynamoDB's, word for word: a key is free when it has no record or one
 * past its expiry; a takeover or a one-shot commit over a record needs it exactly as it was seen (same lease token,
 * same status); a completion, a release or an abandon needs its own lease token on a record still in progress.
 *
 * Two shapes of answer:
 * - a claim or takeover returns the record it wrote (`written`), or else the record that stopped it, read in the
 *   same statement (its snapshot may predate a write the statement waited on: the store reads that as "changed
 *   under us" and goes round again, as on DynamoDB);
 * - a write whose failure must stop the rest of its transaction (a completion, a one-shot commit) calls the fence,
 *   which raises, with the record it met as of now, when the write matched nothing.
 */

const COLUMNS =
  'scope, key, status, fingerprint, lease_token, lease_expires_at, downstream_key, attempt, created_at, ' +
  'completed_at, expires_at, recover_at, response_status, response_headers, response_body, response_is_base64';

const at = (ms: number) => new Date(ms);
const atSeconds = (seconds: number | undefined) => (seconds === undefined ? null : new Date(seconds * 1000));

/** A whole record as the parameters of an INSERT ($1 to $16, in {@link COLUMNS} order). */
function recordValues(record: IdempotencyRecord, completedAt: number | undefined): unknown[] {
  const { scope, clientKey } = splitScopedKey(record.key);
  const response = record.response ? responseColumns(record.response) : [null, null, null, null];
  return [
    scope,
    clientKey,
    record.status,
    record.fingerprint,
    record.leaseToken,
    at(record.leaseExpiresAt),
    record.downstreamKey,
    record.attempt,
    at(record.createdAt),
    completedAt === undefined ? null : at(completedAt),
    atSeconds(record.expiresAt),
    record.recoverAt === undefined ? null : at(record.recoverAt),
    ...response,
  ];
}

/** A new generation over an expired record: every column, and no steps (a new generation starts without). */
const OVERWRITE = `${COLUMNS.split(', ')
  .filter((column) => column !== 'scope' && column !== 'key')
  .map((column) => `${column} = EXCLUDED.${column}`)
  .join(', ')}, steps = NULL, step_revision = NULL`;

/** Each column's type, in {@link COLUMNS} order: an INSERT from a SELECT learns no parameter type from its target. */
const COLUMN_TYPES = [
  'text',
  'text',
  'text',
  'text',
  'text',
  'timestamptz',
  'text',
  'integer',
  'timestamptz',
  'timestamptz',
  'timestamptz',
  'timestamptz',
  'smallint',
  'json',
  'bytea',
  'boolean',
];
const TYPED_PLACEHOLDERS = COLUMN_TYPES.map((type, i) => `$${i + 1}::${type}`).join(', ');

/**
 * A CTE that sets `lock_timeout` for the rest of this one statement (its own implicit transaction: `set_config`'s
 * `is_local`), so that a write waiting on a row another session holds gives up after it with 55P03 instead of
 * waiting for as long as that session lives: one that went silent mid-commit holds its row until the server ends it.
 * A SET would cost a round trip of its own (or a transaction around the statement); this is one statement still.
 * The write reads from it (`FROM bounded`), so it is set before the write can wait on anything.
 */
function lockBound(timeoutParam: string): string {
  return `bounded AS MATERIALIZED (SELECT set_config('lock_timeout', ${timeoutParam}, true) AS lock_timeout)`;
}

/**
 * A write, followed in the same statement by the record that stopped it: `written` says which of the two came back.
 * The fallback read sees the statement's snapshot, taken before any lock the write waited on.
 */
function writtenOrSeen(
  names: TableNames,
  write: string,
  scopeParam: string,
  keyParam: string,
  lockTimeoutParam: string,
): string {
  return `WITH ${lockBound(lockTimeoutParam)},
written AS (${write} RETURNING ${recordJson('cur')} AS record)
SELECT true AS written, record FROM written
UNION ALL
SELECT false, ${recordJson('r')} FROM ${names.table} AS r
 WHERE r.scope = ${scopeParam} AND r.key = ${keyParam} AND NOT EXISTS (SELECT FROM written)`;
}

/**
 * Claim a key nobody holds: insert the record, or overwrite one past its expiry (its new generation: new downstream
 * key, attempt 1). Of any number of concurrent claims exactly one inserts; the others wait on the primary key for it
 * to commit, and find it there, not free. An unfinished recoverable operation is never free: it has no expiry, and
 * `expires_at <= now` is never true of a null.
 *
 * The record as committed is read first, without a lock, and when it is there and not free the statement writes
 * nothing and answers with it: `ON CONFLICT DO UPDATE` would lock the row even when its condition then fails, and so
 * wait on any session holding it. A replay of a completed key, or a duplicate of one in flight, answers from what is
 * committed however long another session holds the row. Only a key that looks free is written, and that wait is
 * bounded by the lock timeout ($18).
 */
export function claimFresh(
  names: TableNames,
  record: IdempotencyRecord,
  now: number,
  lockTimeoutMs: number,
): Statement {
  return {
    text: `WITH ${lockBound('$18')},
seen AS MATERIALIZED (
  SELECT ${recordJson('r')} AS record, coalesce(r.expires_at <= $17, false) AS free
    FROM ${names.table} AS r WHERE r.scope = $1::text AND r.key = $2::text
),
written AS (
  INSERT INTO ${names.table} AS cur (${COLUMNS})
  SELECT claimed.* FROM (VALUES (${TYPED_PLACEHOLDERS})) AS claimed, bounded
   WHERE NOT EXISTS (SELECT FROM seen WHERE NOT seen.free)
  ON CONFLICT (scope, key) DO UPDATE SET ${OVERWRITE} WHERE cur.expires_at <= $17
  RETURNING ${recordJson('cur')} AS record
)
SELECT true AS written, record FROM written
UNION ALL
SELECT false, record FROM seen WHERE NOT EXISTS (SELECT FROM written)`,
    values: [...recordValues(record, undefined), at(now), String(lockTimeoutMs)],
  };
}

/**
 * Take over a record whose owner is gone (lease ran out) or that was released or abandoned: a new lease token and
 * lease, one more attempt, fingerprint and downstream key kept. Conditioned on the record being exactly as seen, so
 * of two concurrent takeovers one wins: the other waits for its row lock (at most the lock timeout, $9), then finds
 * another lease token. A recoverable operation is (again) in the recovery set, due when the new lease ends, with no
 * expiry; any other record keeps one.
 */
export function takeOver(
  names: TableNames,
  previous: IdempotencyRecord,
  next: IdempotencyRecord,
  lockTimeoutMs: number,
): Statement {
  const { scope, clientKey } = splitScopedKey(previous.key);
  return {
    text: writtenOrSeen(
      names,
      `UPDATE ${names.table} AS cur
   SET status = '${RecordStatus.InProgress}', lease_token = $3, lease_expires_at = $4, expires_at = $5,
       attempt = cur.attempt + 1, recover_at = $6
  FROM bounded
 WHERE cur.scope = $1 AND cur.key = $2 AND cur.lease_token = $7 AND cur.status = $8`,
      '$1',
      '$2',
      '$9',
    ),
    values: [
      scope,
      clientKey,
      next.leaseToken,
      at(next.leaseExpiresAt),
      atSeconds(next.expiresAt),
      next.recoverAt === undefined ? null : at(next.recoverAt),
      previous.leaseToken,
      previous.status,
      String(lockTimeoutMs),
    ],
  };
}

/**
 * The record's completion: the stored response, a new expiry, out of the recovery set. Fencing: only the current
 * owner, only once; otherwise the fence raises, and the transaction (every effect in it) rolls back. The same
 * statement is the first of a transaction with effects, or a round trip of its own without.
 */
export function complete(
  names: TableNames,
  lease: Lease,
  response: StoredResponse,
  now: number,
  expiresAt: number,
): Statement {
  const { scope, clientKey } = splitScopedKey(lease.key);
  return {
    text: `WITH done AS (
  UPDATE ${names.table}
     SET status = '${RecordStatus.Completed}', response_status = $3, response_headers = $4, response_body = $5,
         response_is_base64 = $6, completed_at = $7, expires_at = $8, recover_at = NULL
   WHERE scope = $1 AND key = $2 AND lease_token = $9 AND status = '${RecordStatus.InProgress}'
  RETURNING 1
)
SELECT ${names.fence}((SELECT count(*) FROM done), $1, $2)`,
    values: [scope, clientKey, ...responseColumns(response), at(now), atSeconds(expiresAt), lease.leaseToken],
  };
}

/**
 * A recovery point: the operation's steps at their new revision. Fencing: only the current owner, in progress, and
 * only from the revision this checkpoint follows, so one sent again after its reply was lost meets its own revision
 * instead of running its effects twice; otherwise the fence raises, and the transaction (the step's effects in it)
 * rolls back. The first statement of a transaction with effects, or a round trip of its own without.
 */
export function checkpoint(names: TableNames, lease: Lease, progress: StepProgress): Statement {
  const { scope, clientKey } = splitScopedKey(lease.key);
  return {
    text: `WITH done AS (
  UPDATE ${names.table}
     SET steps = $3::json, step_revision = $4
   WHERE scope = $1 AND key = $2 AND lease_token = $5 AND status = '${RecordStatus.InProgress}'
     AND coalesce(step_revision, 0) = $6
  RETURNING 1
)
SELECT ${names.fence}((SELECT count(*) FROM done), $1, $2)`,
    values: [
      scope,
      clientKey,
      JSON.stringify(progress.steps),
      progress.revision,
      lease.leaseToken,
      progress.revision - 1,
    ],
  };
}

/**
 * Ends this owner's lease with a new status (released, abandoned): the lease ends now, and `change` says what becomes
 * of `recover_at` and `expires_at` (a field left out is unchanged). Conditioned on still owning the record in
 * progress. `ended` is true when it did, or when the record already holds exactly this ending under this owner's
 * token (its own earlier call, whose reply was lost). Its wait on a session holding the row (its own commit, gone
 * silent) is bounded by the lock timeout.
 */
export function endLease(
  names: TableNames,
  lease: Lease,
  status: RecordStatus,
  now: number,
  change: { readonly recoverAt?: number | null; readonly expiresAt?: number | null },
  lockTimeoutMs: number,
): Statement {
  const { scope, clientKey } = splitScopedKey(lease.key);
  const values: unknown[] = [scope, clientKey, status, at(now), lease.leaseToken];
  const sets = ['status = $3', 'lease_expires_at = $4'];
  if (change.recoverAt !== undefined) {
    values.push(change.recoverAt === null ? null : at(change.recoverAt));
    sets.push(`recover_at = $${values.length}`);
  }
  if (change.expiresAt !== undefined) {
    values.push(atSeconds(change.expiresAt ?? undefined));
    sets.push(`expires_at = $${values.length}`);
  }
  values.push(String(lockTimeoutMs));
  return {
    text: `WITH ${lockBound(`$${values.length}`)},
ended AS (
  UPDATE ${names.table} AS cur SET ${sets.join(', ')}
    FROM bounded
   WHERE cur.scope = $1 AND cur.key = $2 AND cur.lease_token = $5 AND cur.status = '${RecordStatus.InProgress}'
  RETURNING 1
)
SELECT EXISTS (SELECT FROM ended)
    OR EXISTS (SELECT FROM ${names.table} WHERE scope = $1 AND key = $2 AND lease_token = $5 AND status = $3) AS ended`,
    values,
  };
}

/**
 * The one-shot commit of work local to this database: the record written completed, in the transaction of its
 * effects. Over no record or one past its expiry (`previous` undefined), or over exactly the record seen (a takeover
 * of a released, abandoned or run-out one). A concurrent one-shot for the same key waits on the primary key until
 * this transaction ends, for at most `lockTimeoutMs`; when nothing matched, the fence raises with the record met, and
 * the effects behind this statement never run.
 *
 * The lock timeout is set for the write alone, inside the statement, and put back as the session had it once the
 * fence has passed: the effects' own waits are not the claim's. A `SET LOCAL` after it would be one more statement
 * in every one-shot, and on a duplicate one more error (skipped, after the fence's) for PostgreSQL to log and the
 * client to build (bench/README.md).
 */
export function commitOneShot(
  names: TableNames,
  record: IdempotencyRecord,
  previous: IdempotencyRecord | undefined,
  now: number,
  lockTimeoutMs: number,
): Statement {
  const values = recordValues(record, now);
  if (previous === undefined) {
    // As the claim does: a key already taken, as committed, is not written at all, so a duplicate neither locks its
    // row (ON CONFLICT DO UPDATE would, and write the lock to the WAL, even when its condition then fails) nor waits
    // on a session holding it; the fence answers with the record. Nothing that commits meanwhile can make such a
    // record free: only its expiry passing does, and that is a later call's business.
    return {
      text: `WITH ${lockBoundUntilFenced('$18')},
written AS (
  INSERT INTO ${names.table} AS cur (${COLUMNS})
  SELECT claimed.* FROM (VALUES (${TYPED_PLACEHOLDERS})) AS claimed, bounded
   WHERE NOT EXISTS (SELECT FROM ${names.table} AS r
                      WHERE r.scope = $1::text AND r.key = $2::text AND NOT coalesce(r.expires_at <= $17, false))
  ON CONFLICT (scope, key) DO UPDATE SET ${OVERWRITE} WHERE cur.expires_at <= $17
  RETURNING 1
)
${fencedThenLockRestored(names)}`,
      values: [...values, at(now), String(lockTimeoutMs)],
    };
  }
  const assignments = COLUMNS.split(', ')
    .map((column, index) => ({ column, index }))
    .filter(({ column }) => column !== 'scope' && column !== 'key')
    .map(({ column, index }) => `${column} = $${index + 1}`)
    .concat('steps = NULL', 'step_revision = NULL')
    .join(', ');
  return {
    text: `WITH ${lockBoundUntilFenced('$19')},
written AS (
  UPDATE ${names.table} AS cur SET ${assignments}
    FROM bounded
   WHERE cur.scope = $1 AND cur.key = $2 AND cur.lease_token = $17 AND cur.status = $18
  RETURNING 1
)
${fencedThenLockRestored(names)}`,
    values: [...values, previous.leaseToken, previous.status, String(lockTimeoutMs)],
  };
}

/**
 * {@link lockBound} for a statement inside a longer transaction: the lock timeout the session had is kept beside it
 * (read before it is set: `prior` is its own subquery), for {@link fencedThenLockRestored} to put back.
 */
function lockBoundUntilFenced(timeoutParam: string): string {
  return `bounded AS MATERIALIZED (
  SELECT prior.lock_timeout AS lock_timeout_before, set_config('lock_timeout', ${timeoutParam}, true) AS lock_timeout
    FROM (SELECT current_setting('lock_timeout') AS lock_timeout OFFSET 0) AS prior
)`;
}

/**
 * The fence over what `written` matched, and only once it has passed (`fenced` is a subquery the planner keeps:
 * `OFFSET 0`), the session's own lock timeout back for the rest of the transaction.
 */
function fencedThenLockRestored(names: TableNames): string {
  return `SELECT set_config('lock_timeout', bounded.lock_timeout_before, true) AS lock_timeout
  FROM (SELECT ${names.fence}((SELECT count(*) FROM written), $1, $2) OFFSET 0) AS fenced, bounded`;
}

/** The record under a key as stored, even past its expiry. */
export function read(names: TableNames, key: string): Statement {
  const { scope, clientKey } = splitScopedKey(key);
  return {
    text: `SELECT ${recordJson('r')} AS record FROM ${names.table} AS r WHERE r.scope = $1 AND r.key = $2`,
    values: [scope, clientKey],
  };
}

/**
 * The recovery set's due operations, oldest first: the partial index on `recover_at`, never the table. With each,
 * its `created_at` (kept by every takeover and release), from which recovery tells when it was first due.
 */
export function due(names: TableNames, now: number, limit: number): Statement {
  return {
    text: `SELECT scope, key, floor(extract(epoch FROM recover_at) * 1000) AS recover_at_ms,
       floor(extract(epoch FROM created_at) * 1000) AS created_at_ms FROM ${names.table}
 WHERE recover_at IS NOT NULL AND recover_at <= $1
 ORDER BY recover_at, scope, key
 LIMIT $2`,
    values: [at(now), limit],
  };
}

/**
 * One batch of the purge: deletes up to `limit` rows past their expiry. Rows another transaction holds are skipped,
 * not waited for, and each row is checked again once locked: a row claimed afresh meanwhile is not expired any more.
 * A row in the recovery set has no expiry, and is never deleted.
 */
export function purgeBatch(names: TableNames, now: number, limit: number): Statement {
  return {
    text: `DELETE FROM ${names.table} AS r
 USING (SELECT scope, key FROM ${names.table} WHERE expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED) AS expired
 WHERE r.scope = expired.scope AND r.key = expired.key`,
    values: [at(now), limit],
  };
}

/**
 * The first statement of each of the store's transactions: its bounds, for this transaction only (`is_local`), in
 * the same round trip as the rest when the pool pipelines.
 * - `idle_in_transaction_session_timeout`: the store never holds a transaction open across anything but its own
 *   statements (and an effect function's queries), so a transaction left idle this long has lost its client (a
 *   partition, a proxy that stopped forwarding): the server ends the session and its row locks go with it, instead
 *   of holding the key until TCP notices, hours later.
 * - `statement_timeout`, when given: the time the call has left; a statement the caller stopped waiting for stops.
 * A bound not given stays what the session has (the role's or the database's setting).
 */
export function transactionBounds(bounds: { readonly idleMs: number; readonly statementMs?: number }): Statement {
  return {
    text: `SELECT set_config('idle_in_transaction_session_timeout', $1, true),
       set_config('statement_timeout', coalesce($2, current_setting('statement_timeout')), true)`,
    values: [String(bounds.idleMs), bounds.statementMs === undefined ? null : String(Math.max(1, bounds.statementMs))],
  };
}
