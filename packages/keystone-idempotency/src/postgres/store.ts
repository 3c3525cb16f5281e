import type { Pool } from 'pg';
import { type Clock, type IdSource, randomIds, systemClock } from '../engine/clock.js';
import type {
  ClaimOptions,
  ClaimOutcome,
  DueOperation,
  FindDueOptions,
  IdempotencyStore,
  OneShotContext,
  OneShotOutcome,
  ResumeOptions,
  ResumeOutcome,
} from '../engine/contract.js';
import { isExpired, isOwnCompletion, leaseOf } from '../engine/decide.js';
import {
  ConfigurationError,
  ContendedError,
  EffectKindError,
  IdempotencyError,
  LeaseLostError,
  TooManyEffectsError,
} from '../engine/errors.js';
import { joinScopedKey } from '../engine/key.js';
import {
  assertStorable,
  type ClaimSettings,
  claimRounds,
  expiryFrom,
  freshClaimRecord,
  type OneShotStore,
  type OwnershipWrites,
  oneShotRounds,
  type RecordSource,
  resumeRounds,
  type Seen,
  type StoreLifetimeOptions,
  storeTimings,
  takeoverRecord,
} from '../engine/ownership.js';
import { type IdempotencyRecord, type Lease, RecordStatus, type StoredResponse } from '../engine/record.js';
import { fromDetail, fromJson, type RecordJson } from './codec.js';
import {
  Database,
  type DatabaseOptions,
  firstFailedStep,
  type Queryable,
  type Statement,
  type Step,
} from './database.js';
import { effectConditionFailure, isLockTimeout, sqlState } from './database-errors.js';
import { FENCE_SQLSTATE, type TableNames, type TableOptions, tableNames } from './schema.js';
import * as sql from './statements.js';

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

export interface PostgresStoreOptions extends StoreLifetimeOptions, TableOptions, DatabaseOptions {
  /** A pg `Pool`; created with `pipeline: true`, a commit with its statements is one round trip. */
  readonly pool: Pick<Pool, 'connect'>;
  /** Largest stored response (body plus headers, bytes). Default 1 MiB. */
  readonly maxResponseBytes?: number;
  /** Most effects one commit carries. Default 1000. */
  readonly maxEffects?: number;
  /**
   * How long a claim, a takeover, a release or a one-shot commit waits for another session holding its key (a
   * concurrent duplicate's, a committing owner's, or one whose connection went silent mid-commit) before answering
   * in flight. Default 1000 ms: a commit holds its row for a round trip or two, so a wait that long means it is
   * stuck, and a client told 409 with `Retry-After` does better than one whose request hangs.
   */
  readonly lockTimeoutMs?: number;
  /**
   * How long one of the store's transactions may sit idle (waiting for its client's next statement) before the
   * server ends its session, releasing its row locks: set in each transaction, whatever the database's setting.
   * Default 5000 ms: its statements are written back to back, so an idle gap is a round trip or an effect
   * function's own code; five seconds of silence is a client that is gone, and ending it frees the key within a
   * short lease's reach instead of when TCP gives up.
   */
  readonly idleInTransactionTimeoutMs?: number;
}

export const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;
export const DEFAULT_MAX_EFFECTS = 1000;
export const DEFAULT_LOCK_TIMEOUT_MS = 1000;
export const DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS = 5000;

/** The one-shot's claim follows its bounds; its lock timeout is reset after it, and its effects follow. */
const ONE_SHOT_CLAIM_STEP = 1;
const ONE_SHOT_EFFECTS_FROM = 3;
/** A commit's fenced completion follows its bounds, and its effects follow the completion. */
const COMMIT_COMPLETION_STEP = 1;
const COMMIT_EFFECTS_FROM = 2;

/**
 * The idempotency engine's store on PostgreSQL: the same protocol as on DynamoDB, step for step, each step a
 * statement conditioned as DynamoDB's condition expressions are.
 *
 * ```
 *  claim: INSERT ... ON CONFLICT          commit: one transaction, BEGIN ... COMMIT   ┌─ replay: the record comes
 *  DO UPDATE WHERE expired                  the fenced completion first, effects after │   back with the failed claim
 *  absent|expired ──► IN_PROGRESS ───────────────────────────────────────► COMPLETED ─┤
 *                       │   ▲     UPDATE ... WHERE lease_token = mine AND              └─ different body: mismatch
 *            release    │   │     status = IN_PROGRESS, or the fence raises and the
 *  lease_token = mine   ▼   │     transaction (its effects with it) rolls back
 *                     RELEASED ── takeover: UPDATE ... WHERE lease_token = seen AND status = seen
 * ```
 *
 * Local effects: {@link claimAndCommit} claims, runs the handler's SQL and completes in one transaction, one round
 * trip; a concurrent duplicate waits on the primary key, then replays (or, after `lockTimeoutMs`, is in flight).
 * Outside effects: {@link claim} and {@link commit} are two short transactions, fenced by the lease token; no
 * transaction is ever held open across the call to the outside system.
 *
 * Times come from the injected clock, passed as parameters; PostgreSQL's own `now()` never decides anything.
 *
 * @example
 * const pool = new Pool({ connectionString: databaseUrl, pipeline: true });
 * await migrate(pool);
 * const store = new PostgresStore({ pool });
 * const outcome = await store.claim(scopedKey(scope), fingerprint(request));
 * if (outcome.kind === 'acquired') {
 *   const charge = await processor.charge(body, { idempotencyKey: outcome.lease.downstreamKey });
 *   await store.commit(outcome.lease, response(charge), [
 *     { text: 'INSERT INTO payments (id, amount) VALUES ($1, $2)', values: [charge.id, charge.amount] },
 *   ]);
 * }
 */
export class PostgresStore implements IdempotencyStore<PostgresEffect> {
  readonly leaseMs: number;
  readonly ttlSeconds: number;
  readonly maxEffects: number;
  readonly names: TableNames;
  private readonly db: Database;
  private readonly clock: Clock;
  private readonly ids: IdSource;
  private readonly maxResponseBytes: number;
  /** The writes and read the engine's claim and resume rounds drive. */
  private readonly ownership: OwnershipWrites;
  /** What the engine's rounds of claimAndCommit need of this store. */
  private readonly oneShot: OneShotStore;
  private readonly lockTimeoutMs: number;
  private readonly idleInTransactionTimeoutMs: number;

  constructor(options: PostgresStoreOptions) {
    const { leaseMs, ttlSeconds } = storeTimings(options);
    const lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;
    if (!Number.isInteger(lockTimeoutMs) || lockTimeoutMs < 1) {
      throw new ConfigurationError(`lockTimeoutMs must be a positive whole number of ms, got ${lockTimeoutMs}`);
    }
    const idleMs = options.idleInTransactionTimeoutMs ?? DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS;
    if (!Number.isInteger(idleMs) || idleMs < 1) {
      throw new ConfigurationError(`idleInTransactionTimeoutMs must be a positive whole number of ms, got ${idleMs}`);
    }
    this.idleInTransactionTimeoutMs = idleMs;
    if (!options.pool) throw new ConfigurationError('pool is required');
    this.names = tableNames(options);
    this.db = new Database(options.pool, options);
    this.leaseMs = leaseMs;
    this.ttlSeconds = ttlSeconds;
    this.maxEffects = options.maxEffects ?? DEFAULT_MAX_EFFECTS;
    this.clock = options.clock ?? systemClock;
    this.ids = options.ids ?? randomIds;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.ownership = {
      clock: this.clock,
      leaseMs: this.leaseMs,
      putFresh: (key, fingerprint, claim) => this.putFresh(key, fingerprint, claim),
      takeOver: (previous, now, claim) => this.takeOver(previous, now, claim),
      get: (key) => this.get(key),
    };
    this.oneShot = {
      clock: this.clock,
      ids: this.ids,
      ttlSeconds: this.ttlSeconds,
      maxResponseBytes: this.maxResponseBytes,
      get: (key) => this.get(key),
    };
    this.lockTimeoutMs = lockTimeoutMs;
  }

  /**
   * Claims `key` for a request with this fingerprint. A fresh key costs one statement; a duplicate learns the
   * existing record from that same statement, so a replay is one round trip too.
   */
  async claim(key: string, fingerprint: string, options: ClaimOptions = {}): Promise<ClaimOutcome> {
    return claimRounds(this.ownership, key, fingerprint, options);
  }

  /**
   * Refuses anything but a PostgreSQL effect (a statement with its `text`, or a function given the transaction) with
   * an `EffectKindError`: a DynamoDB transaction item meant for a DynamoDB store, say, staged from JavaScript or
   * through a cast. The handle calls it in `stage()`; {@link commit} and {@link claimAndCommit} call it for every
   * effect before they write anything.
   */
  checkEffect(effect: unknown, index: number): void {
    const problem = notAPostgresEffect(effect);
    if (problem) {
      throw new EffectKindError(
        index,
        `effect ${index} is not a PostgreSQL effect (a statement { text, values? } or a function of the ` +
          `transaction): ${problem}. A PostgresStore runs SQL in the commit's transaction; nothing was written`,
      );
    }
  }

  /**
   * Commits the work: the key's completion and then the effects, in one transaction (one round trip with a
   * pipelining pool and statement effects), or, with no effects, the completion alone as one statement. The
   * completion is conditioned on the lease token still being ours and the record still in progress; when it is not,
   * the fence raises and the transaction rolls back, so a stale owner writes nothing at all, effects included. The
   * record leaves the recovery set and lives (and replays) a full TTL from now.
   *
   * A commit whose reply was lost (COMMIT's included) is sent again by the store on a fresh connection, or by the
   * caller: either way its completion meets the completion the first one wrote, under its own lease token, and the
   * commit succeeds without writing anything twice.
   *
   * @throws {LeaseLostError} this owner no longer holds the record; nothing was written.
   * @throws {EffectConditionFailedError} one of the effects failed its own condition; nothing was written.
   * @throws {ResponseTooLargeError} the response can't be stored; nothing was written.
   */
  async commit(lease: Lease, response: StoredResponse, effects: readonly PostgresEffect[] = []): Promise<void> {
    this.checkEffects(effects);
    this.assertStorable(response);
    if (effects.length > this.maxEffects) throw new TooManyEffectsError(this.maxEffects);
    const now = this.clock.now();
    const completion = sql.complete(this.names, lease, response, now, this.expiryFrom(now));
    if (effects.length === 0) {
      try {
        await this.db.query(completion);
      } catch (error) {
        this.fenced(lease, error);
      }
      return;
    }
    const outcome = await this.db.transaction([
      this.bounds(),
      completion,
      ...effects.map((effect, i) => this.effectStep(effect, i)),
    ]);
    if (outcome.committed) return;
    const failed = firstFailedStep(outcome);
    if (failed?.step === COMMIT_COMPLETION_STEP) return this.fenced(lease, failed.error);
    this.throwEffectFailure(lease.key, failed, COMMIT_EFFECTS_FROM);
  }

  /**
   * Gives the key back after a transient failure, conditioned on still owning it. The lease ends now, but the
   * fingerprint and downstream key stay. A recoverable operation becomes due for recovery one lease from now, and
   * stays without an expiry until it is finished. Returns false (and changes nothing) when this owner no longer holds
   * it; true again for a release already made.
   */
  async release(lease: Lease): Promise<boolean> {
    const now = this.clock.now();
    return this.endLease(
      lease,
      RecordStatus.Released,
      now,
      lease.recoverable ? { recoverAt: now + this.leaseMs, expiresAt: null } : {},
    );
  }

  /**
   * Gives up on an operation (recovery found no effect under its downstream key, and its client is gone),
   * conditioned on still owning it. It leaves the recovery set but keeps its fingerprint and downstream key for a
   * full TTL from now. Returns false (and changes nothing) when this owner no longer holds it.
   */
  async abandon(lease: Lease): Promise<boolean> {
    const now = this.clock.now();
    return this.endLease(lease, RecordStatus.Abandoned, now, { recoverAt: null, expiresAt: this.expiryFrom(now) });
  }

  /**
   * Recovery's way in: takes over an unfinished operation by its key (released, abandoned, or in progress with its
   * lease run out), keeping its fingerprint and downstream key. Never creates a record, never disturbs a live owner.
   * An unfinished recoverable operation is never past its expiry, however long it waited: recovery that falls
   * behind still finds it.
   */
  async resume(key: string, options: ResumeOptions = {}): Promise<ResumeOutcome> {
    return resumeRounds(this.ownership, key, options);
  }

  /**
   * Recoverable operations due for recovery: in progress with their owner's lease run out, or released a lease ago
   * and not retried since. Oldest first, at most `limit`, from the partial index on `recover_at`.
   */
  async findDue(options: FindDueOptions = {}): Promise<DueOperation[]> {
    const { rows } = await this.db.query<{ scope: string; key: string; recover_at_ms: string; created_at_ms: string }>(
      sql.due(this.names, this.clock.now(), options.limit ?? 100),
    );
    return rows.map((row) => {
      const recoverAt = Number(row.recover_at_ms);
      // First due a lease after its first claim (never later than it is due now: a lease made longer since).
      const firstDueAt = Math.min(recoverAt, Number(row.created_at_ms) + this.leaseMs);
      return { key: joinScopedKey(row.scope, row.key), recoverAt, firstDueAt };
    });
  }

  /**
   * For work that is entirely local to this database: the record written completed, and the effects, in one
   * transaction: one round trip for a first request, and one for a duplicate, which learns the stored record from
   * the fence of that same transaction. A duplicate racing the original waits on the primary key until the
   * original's transaction ends, then replays; one that waited `lockTimeoutMs` is in flight (or, if the original's
   * record is not even visible yet, `ContendedError`). `build` must be free of side effects: it may run more than
   * once and its result is discarded when the key turns out to be taken.
   */
  async claimAndCommit(
    key: string,
    fingerprint: string,
    build: (context: OneShotContext) => Promise<{ response: StoredResponse; effects: readonly PostgresEffect[] }>,
  ): Promise<OneShotOutcome> {
    return oneShotRounds(this.oneShot, key, fingerprint, build, async ({ record, previous, effects, now }) => {
      if (effects.length > this.maxEffects) throw new TooManyEffectsError(this.maxEffects);
      this.checkEffects(effects);
      const outcome = await this.db.transaction([
        // The wait on a concurrent duplicate's transaction is bounded by the lock timeout; the effects' own waits by
        // the call's time left.
        this.bounds(this.lockTimeoutMs),
        sql.commitOneShot(this.names, record, previous, now),
        { text: 'SET LOCAL lock_timeout TO DEFAULT' },
        ...effects.map((effect, i) => this.effectStep(effect, i)),
      ]);
      if (outcome.committed) return { kind: 'committed' };
      const failed = firstFailedStep(outcome);
      if (failed?.step !== ONE_SHOT_CLAIM_STEP) {
        this.throwEffectFailure(key, failed, ONE_SHOT_EFFECTS_FROM);
      }
      if (isLockTimeout(failed.error)) {
        // The transaction holding the key is still running: a live owner's commit (the next round answers in
        // flight, or replays what landed meanwhile), or a duplicate's insert, not visible before it commits.
        const holding = await this.read(key);
        if (holding === undefined) throw new ContendedError(key, { cause: failed.error });
        return { kind: 'met', record: holding };
      }
      if (sqlState(failed.error) !== FENCE_SQLSTATE) throw failed.error;
      const met = fromDetail((failed.error as { detail?: string }).detail);
      // Sent again after its COMMIT's reply was lost, it meets the completion it wrote: its own.
      if (met?.leaseToken === record.leaseToken && met.status === RecordStatus.Completed) return { kind: 'committed' };
      return { kind: 'met', record: met };
    });
  }

  /** The live record under `key`, or undefined when absent or past its expiry. */
  async get(key: string): Promise<IdempotencyRecord | undefined> {
    const record = await this.read(key);
    return record === undefined || isExpired(record, this.clock.now()) ? undefined : record;
  }

  /**
   * Deletes rows past their expiry, in batches of `batchSize` (at most `maxBatches` of them), each batch its own
   * short transaction that skips rows other transactions hold: for the scheduled completer, after recovery. Reads
   * never wait for it (a row past its expiry is absent to them already); it keeps the table from growing. Returns
   * how many rows it deleted.
   */
  async purgeExpired(options: { batchSize?: number; maxBatches?: number } = {}): Promise<number> {
    const batchSize = options.batchSize ?? 1000;
    const maxBatches = options.maxBatches ?? 100;
    let deleted = 0;
    for (let batch = 0; batch < maxBatches; batch++) {
      const { rowCount } = await this.db.query(sql.purgeBatch(this.names, this.clock.now(), batchSize));
      deleted += rowCount ?? 0;
      if ((rowCount ?? 0) < batchSize) break;
    }
    return deleted;
  }

  /** The record under `key` as stored, even past its expiry. */
  private async read(key: string): Promise<IdempotencyRecord | undefined> {
    const { rows } = await this.db.query<{ record: RecordJson }>(sql.read(this.names, key));
    return rows[0] ? fromJson(rows[0].record) : undefined;
  }

  /**
   * A completion that failed its fence: this owner's own completion (its first commit landed and its reply was lost)
   * is a success; anything else means the lease was lost, and nothing of this commit was written.
   */
  private fenced(lease: Lease, error: unknown): void {
    if (sqlState(error) !== FENCE_SQLSTATE) throw error;
    const record = fromDetail((error as { detail?: string }).detail);
    if (isOwnCompletion(record, lease) && record && !isExpired(record, this.clock.now())) return;
    throw new LeaseLostError(lease.key, record, { cause: error });
  }

  /** Why a transaction whose key write went through did not commit: an effect, as the contract names it. */
  private throwEffectFailure(
    key: string,
    failed: { step?: number; error: unknown } | undefined,
    effectsFrom: number,
  ): never {
    if (failed === undefined) {
      throw new IdempotencyError(
        `the commit of ${key} was rolled back: an effect function caught a database error and carried on`,
      );
    }
    if (failed.step !== undefined && failed.step >= effectsFrom) {
      throw effectConditionFailure(failed.error, failed.step - effectsFrom) ?? failed.error;
    }
    throw failed.error;
  }

  /** An effect as a step of the commit's transaction; `expectRows` becomes a check that raises when it fails. */
  private effectStep(effect: PostgresEffect, index: number): Step {
    if (typeof effect === 'function') return effect;
    if (effect.expectRows === undefined) return { text: effect.text, values: effect.values ?? [] };
    if (!Number.isInteger(effect.expectRows) || effect.expectRows < 0) {
      throw new ConfigurationError(`expectRows must be a whole number of rows, got ${effect.expectRows}`);
    }
    const values = effect.values ?? [];
    return {
      text: `WITH effect AS (${effect.text})
SELECT ${this.names.expectRows}((SELECT count(*) FROM effect), $${values.length + 1}, $${values.length + 2})`,
      values: [...values, effect.expectRows, index],
    };
  }

  private async endLease(
    lease: Lease,
    status: RecordStatus,
    now: number,
    change: { recoverAt?: number | null; expiresAt?: number | null },
  ): Promise<boolean> {
    const { rows } = await this.db.query<{ ended: boolean }>(
      sql.endLease(this.names, lease, status, now, change, this.lockTimeoutMs),
    );
    return rows[0]?.ended === true;
  }

  private expiryFrom(nowMs: number): number {
    return expiryFrom(nowMs, this.ttlSeconds);
  }

  private recordSource(now: number): RecordSource {
    return { now, ids: this.ids, ttlSeconds: this.ttlSeconds };
  }

  /** Claim a key nobody holds: succeeds only if the record is absent or expired. */
  private async putFresh(key: string, fingerprint: string, claim: ClaimSettings): Promise<Seen> {
    const now = this.clock.now();
    const record = freshClaimRecord(key, fingerprint, claim, this.recordSource(now));
    return this.written(key, sql.claimFresh(this.names, record, now, this.lockTimeoutMs), record, false);
  }

  /**
   * Take over a record whose owner is gone (lease ran out) or that was released. The update names the lease token
   * we saw, so of two concurrent takeovers exactly one wins; the fingerprint and downstream key are kept.
   */
  private async takeOver(previous: IdempotencyRecord, now: number, claim: ClaimSettings): Promise<Seen> {
    const record = takeoverRecord(previous, claim, this.recordSource(now));
    return this.written(previous.key, sql.takeOver(this.names, previous, record, this.lockTimeoutMs), record, true);
  }

  /**
   * Runs a claim or takeover: ours if it wrote the record, or if the record it met carries our own lease token (the
   * statement was sent again after its reply was lost, and met what its first sending wrote). A write that waited its
   * lock timeout on a row another session holds is "held": the record as committed is read (a plain read waits on
   * no lock), and the engine answers from it (a replay, when the holder committed meanwhile), or in flight.
   */
  private async written(
    key: string,
    statement: Statement,
    record: IdempotencyRecord,
    takeover: boolean,
  ): Promise<Seen> {
    let rows: { written: boolean; record: RecordJson }[];
    try {
      ({ rows } = await this.db.query<{ written: boolean; record: RecordJson }>(statement));
    } catch (error) {
      if (!isLockTimeout(error)) throw error;
      return { kind: 'held', record: await this.read(key) };
    }
    const row = rows[0];
    if (row?.written || (row && row.record.lease_token === record.leaseToken)) {
      return { kind: 'acquired', lease: leaseOf(record, takeover) };
    }
    return { kind: 'record', record: row ? fromJson(row.record) : undefined };
  }

  /** The bounds a transaction of this store sets first: see {@link sql.transactionBounds}. */
  private bounds(lockMs?: number): Statement {
    const statementMs = this.db.timeLeftMs();
    return sql.transactionBounds({
      idleMs: this.idleInTransactionTimeoutMs,
      ...(lockMs === undefined ? {} : { lockMs }),
      ...(statementMs === undefined ? {} : { statementMs }),
    });
  }

  /** Every effect of a commit, checked before anything is written. */
  private checkEffects(effects: readonly unknown[]): void {
    for (const [index, effect] of effects.entries()) this.checkEffect(effect, index);
  }

  private assertStorable(response: StoredResponse): void {
    assertStorable(response, this.maxResponseBytes);
  }
}

const DYNAMODB_ACTIONS = ['ConditionCheck', 'Put', 'Delete', 'Update'];

/**
 * Why `effect` is not an effect this store can run, in a few words; undefined when it is one. Names the likely
 * mistake: a DynamoDB transaction item where SQL was meant.
 */
function notAPostgresEffect(effect: unknown): string | undefined {
  if (typeof effect === 'function') return undefined;
  if (effect === null || typeof effect !== 'object' || Array.isArray(effect)) {
    return `it is ${effect === null ? 'null' : Array.isArray(effect) ? 'an array' : typeof effect}`;
  }
  const action = DYNAMODB_ACTIONS.find((name) => name in effect);
  if (action) return `it has ${action} (a DynamoDB transaction item, for a DynamoDB store?)`;
  const { text, values } = effect as { text?: unknown; values?: unknown };
  if (typeof text !== 'string' || text.trim().length === 0) return 'it has no SQL `text`';
  if (values !== undefined && !Array.isArray(values)) return 'its `values` is not an array';
  return undefined;
}
