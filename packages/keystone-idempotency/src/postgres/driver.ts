import type { Pool } from 'pg';
import type { DueOperation } from '../engine/contract.js';
import type { ClaimWriteOutcome, IdempotencyDriver, WriteOutcome } from '../engine/driver.js';
import { ConfigurationError, ContendedError, EffectKindError, IdempotencyError } from '../engine/errors.js';
import { joinScopedKey } from '../engine/key.js';
import type { IdempotencyRecord } from '../engine/record.js';
import { fromDetail, fromJson, type RecordJson } from './codec.js';
import { Database, type DatabaseOptions, firstFailedStep, type Statement, type Step } from './database.js';
import { effectConditionFailure, isLockTimeout, sqlState } from './database-errors.js';
import type { PostgresEffect } from './effect.js';
import { FENCE_SQLSTATE, type TableNames, type TableOptions, tableNames } from './schema.js';
import * as sql from './statements.js';

/** The one-shot's claim follows its bounds (it bounds its own lock wait), and its effects follow it. */
const ONE_SHOT_CLAIM_STEP = 1;
const ONE_SHOT_EFFECTS_FROM = 2;
/** A commit's fenced completion follows its bounds, and its effects follow the completion. */
const COMMIT_COMPLETION_STEP = 1;
const COMMIT_EFFECTS_FROM = 2;

/** What the driver is made with: the store's options (`PostgresStoreOptions`) less the engine's. */
export interface PostgresDriverOptions extends TableOptions, DatabaseOptions {
  readonly pool: Pick<Pool, 'connect'>;
  readonly lockTimeoutMs?: number;
  readonly idleInTransactionTimeoutMs?: number;
}

/**
 * The protocol's writes on PostgreSQL: each a statement conditioned as DynamoDB's condition expressions are, that
 * answers with the record it met (`RETURNING`, or the fence's detail when a completion is refused), and each commit
 * one transaction: the fenced write first, the effects after. The engine's `DriverStore` decides which to send;
 * `PostgresStore` is that store over this driver.
 *
 * @internal the package's own PostgreSQL store uses it; not exported by the package
 */
export class PostgresDriver implements IdempotencyDriver<PostgresEffect> {
  readonly names: TableNames;
  readonly maxEffects: number;
  readonly maxResponseBytes: number;
  readonly maxCheckpointBytes: number;
  readonly db: Database;
  private readonly lockTimeoutMs: number;
  private readonly idleInTransactionTimeoutMs: number;

  constructor(
    options: PostgresDriverOptions,
    limits: { maxEffects: number; maxResponseBytes: number; maxCheckpointBytes: number },
  ) {
    const lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;
    if (!Number.isInteger(lockTimeoutMs) || lockTimeoutMs < 1) {
      throw new ConfigurationError(`lockTimeoutMs must be a positive whole number of ms, got ${lockTimeoutMs}`);
    }
    const idleMs = options.idleInTransactionTimeoutMs ?? DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS;
    if (!Number.isInteger(idleMs) || idleMs < 1) {
      throw new ConfigurationError(`idleInTransactionTimeoutMs must be a positive whole number of ms, got ${idleMs}`);
    }
    if (!options.pool) throw new ConfigurationError('pool is required');
    this.lockTimeoutMs = lockTimeoutMs;
    this.idleInTransactionTimeoutMs = idleMs;
    this.names = tableNames(options);
    this.db = new Database(options.pool, options);
    this.maxEffects = limits.maxEffects;
    this.maxResponseBytes = limits.maxResponseBytes;
    this.maxCheckpointBytes = limits.maxCheckpointBytes;
  }

  /**
   * Refuses anything but a PostgreSQL effect (a statement with its `text`, or a function given the transaction) with
   * an `EffectKindError`: a DynamoDB transaction item meant for a DynamoDB store, say, staged from JavaScript or
   * through a cast.
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

  /** The record under `key` as stored, even past its expiry. */
  async read(key: string): Promise<IdempotencyRecord | undefined> {
    const { rows } = await this.db.query<{ record: RecordJson }>(sql.read(this.names, key));
    return rows[0] ? fromJson(rows[0].record) : undefined;
  }

  /** One statement: a fresh key costs one round trip, and a duplicate learns the record from the same one. */
  async putFresh({ record, now }: { record: IdempotencyRecord; now: number }): Promise<ClaimWriteOutcome> {
    return this.written(record.key, sql.claimFresh(this.names, record, now, this.lockTimeoutMs));
  }

  /** The update names the lease token we saw, so of two concurrent takeovers exactly one wins. */
  async takeOver({ previous, record }: { previous: IdempotencyRecord; record: IdempotencyRecord }) {
    return this.written(previous.key, sql.takeOver(this.names, previous, record, this.lockTimeoutMs));
  }

  /**
   * The key's completion and then the effects, in one transaction (one round trip with a pipelining pool and
   * statement effects), or, with no effects, the completion alone as one statement. When the fence raises, the
   * transaction rolls back, effects with it, and the record it met comes back in the error's detail.
   */
  async commit({
    lease,
    response,
    effects,
    now,
    expiresAt,
  }: Parameters<IdempotencyDriver<PostgresEffect>['commit']>[0]) {
    const completion = sql.complete(this.names, lease, response, now, expiresAt);
    if (effects.length === 0) {
      try {
        await this.db.query(completion);
        return { kind: 'written' } as const;
      } catch (error) {
        return fenced(error);
      }
    }
    const outcome = await this.db.transaction([
      this.bounds(),
      completion,
      ...effects.map((effect, i) => this.effectStep(effect, i)),
    ]);
    if (outcome.committed) return { kind: 'written' } as const;
    const failed = firstFailedStep(outcome);
    if (failed?.step === COMMIT_COMPLETION_STEP) return fenced(failed.error);
    return this.throwEffectFailure(lease.key, failed, COMMIT_EFFECTS_FROM);
  }

  /**
   * A recovery point: the fenced progress first, then the step's effects, in one transaction (one round trip with a
   * pipelining pool), or the progress alone as one statement. When the fence raises (another owner, not in progress,
   * or another revision: our own, when this is sent again after its reply was lost), nothing is written, and the
   * record it met comes back in the error's detail.
   */
  async checkpoint({
    lease,
    progress,
    effects,
  }: Parameters<NonNullable<IdempotencyDriver<PostgresEffect>['checkpoint']>>[0]): Promise<WriteOutcome> {
    const write = sql.checkpoint(this.names, lease, progress);
    if (effects.length === 0) {
      try {
        await this.db.query(write);
        return { kind: 'written' } as const;
      } catch (error) {
        return fenced(error);
      }
    }
    const outcome = await this.db.transaction([
      this.bounds(),
      write,
      ...effects.map((effect, i) => this.effectStep(effect, i)),
    ]);
    if (outcome.committed) return { kind: 'written' } as const;
    const failed = firstFailedStep(outcome);
    if (failed?.step === COMMIT_COMPLETION_STEP) return fenced(failed.error);
    return this.throwEffectFailure(lease.key, failed, COMMIT_EFFECTS_FROM);
  }

  /** One statement, which also answers true for a lease already ended this way (its own reply, lost). */
  async endLease({
    lease,
    status,
    now,
    recoverAt,
    expiresAt,
  }: Parameters<IdempotencyDriver<PostgresEffect>['endLease']>[0]): Promise<WriteOutcome> {
    const change = {
      ...(recoverAt === undefined ? {} : { recoverAt }),
      ...(expiresAt === undefined ? {} : { expiresAt }),
    };
    const { rows } = await this.db.query<{ ended: boolean }>(
      sql.endLease(this.names, lease, status, now, change, this.lockTimeoutMs),
    );
    return rows[0]?.ended === true ? { kind: 'written' } : { kind: 'met', record: undefined };
  }

  /**
   * The record written completed, and the effects, in one transaction: one round trip for a first request, and one
   * for a duplicate, which learns the stored record from the fence of that same transaction. A duplicate racing the
   * original waits on the primary key until the original's transaction ends; one that waited `lockTimeoutMs` meets
   * the record as committed (or, if the original's is not even visible yet, `ContendedError`).
   */
  async commitOneShot({
    record,
    previous,
    effects,
    now,
  }: Parameters<IdempotencyDriver<PostgresEffect>['commitOneShot']>[0]): Promise<WriteOutcome> {
    const outcome = await this.db.transaction([
      this.bounds(),
      // Its wait on a concurrent duplicate's transaction is bounded by the lock timeout, set and put back inside it;
      // the effects' own waits by the call's time left.
      sql.commitOneShot(this.names, record, previous, now, this.lockTimeoutMs),
      ...effects.map((effect, i) => this.effectStep(effect, i)),
    ]);
    if (outcome.committed) return { kind: 'written' };
    const failed = firstFailedStep(outcome);
    if (failed?.step !== ONE_SHOT_CLAIM_STEP) {
      this.throwEffectFailure(record.key, failed, ONE_SHOT_EFFECTS_FROM);
    }
    if (isLockTimeout(failed.error)) {
      // The transaction holding the key is still running: a live owner's commit (the next round answers in
      // flight, or replays what landed meanwhile), or a duplicate's insert, not visible before it commits.
      const holding = await this.read(record.key);
      if (holding === undefined) throw new ContendedError(record.key, { cause: failed.error });
      return { kind: 'met', record: holding };
    }
    if (sqlState(failed.error) !== FENCE_SQLSTATE) throw failed.error;
    return { kind: 'met', record: fromDetail((failed.error as { detail?: string }).detail) };
  }

  /** From the partial index on `recover_at`, which sits on the table's row: its first claim's time comes with it. */
  async findDue({ now, limit, leaseMs }: { now: number; limit: number; leaseMs: number }): Promise<DueOperation[]> {
    const { rows } = await this.db.query<{ scope: string; key: string; recover_at_ms: string; created_at_ms: string }>(
      sql.due(this.names, now, limit),
    );
    return rows.map((row) => {
      const recoverAt = Number(row.recover_at_ms);
      // First due a lease after its first claim (never later than it is due now: a lease made longer since).
      const firstDueAt = Math.min(recoverAt, Number(row.created_at_ms) + leaseMs);
      return { key: joinScopedKey(row.scope, row.key), recoverAt, firstDueAt };
    });
  }

  /**
   * Runs a claim or takeover: written, or the record it met (which carries our own lease token when the statement
   * was sent again after its reply was lost). A write that waited its lock timeout on a row another session holds is
   * "held": the record as committed is read (a plain read waits on no lock), and the engine answers from it (a
   * replay, when the holder committed meanwhile), or in flight.
   */
  private async written(key: string, statement: Statement): Promise<ClaimWriteOutcome> {
    let rows: { written: boolean; record: RecordJson }[];
    try {
      ({ rows } = await this.db.query<{ written: boolean; record: RecordJson }>(statement));
    } catch (error) {
      if (!isLockTimeout(error)) throw error;
      return { kind: 'held', record: await this.read(key) };
    }
    const row = rows[0];
    if (row?.written) return { kind: 'written' };
    return { kind: 'met', record: row ? fromJson(row.record) : undefined };
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
    // An effect's SQL is the team's, and may carry values in its text: never prepared (see Statement.prepare).
    if (effect.expectRows === undefined) return { text: effect.text, values: effect.values ?? [], prepare: false };
    if (!Number.isInteger(effect.expectRows) || effect.expectRows < 0) {
      throw new ConfigurationError(`expectRows must be a whole number of rows, got ${effect.expectRows}`);
    }
    const values = effect.values ?? [];
    return {
      text: `WITH effect AS (${effect.text})
SELECT ${this.names.expectRows}((SELECT count(*) FROM effect), $${values.length + 1}, $${values.length + 2})`,
      values: [...values, effect.expectRows, index],
      prepare: false,
    };
  }

  /** The bounds a transaction of this store sets first: see {@link sql.transactionBounds}. */
  private bounds(): Statement {
    const statementMs = this.db.timeLeftMs();
    return sql.transactionBounds({
      idleMs: this.idleInTransactionTimeoutMs,
      ...(statementMs === undefined ? {} : { statementMs }),
    });
  }
}

/**
 * A completion that failed its fence: the record the fence met, from its detail. The engine tells this owner's own
 * completion (its first commit landed and its reply was lost) from a lost lease.
 */
function fenced(error: unknown): WriteOutcome {
  if (sqlState(error) !== FENCE_SQLSTATE) throw error;
  return { kind: 'met', record: fromDetail((error as { detail?: string }).detail), cause: error };
}

export const DEFAULT_LOCK_TIMEOUT_MS = 1000;
export const DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS = 5000;

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
