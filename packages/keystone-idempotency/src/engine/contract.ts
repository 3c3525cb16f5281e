import type { Clock } from './clock.js';
import type { IdempotencyRecord, Lease, StoredResponse } from './record.js';
import type { StepProgress } from './steps.js';

/**
 * The store contract: what the engine's lifecycle, every adapter (HTTP, SQS, `makeIdempotent`) and recovery need
 * from a database. DynamoDB (`keystone-idempotency/dynamodb`) and PostgreSQL (`keystone-idempotency/postgres`) each
 * implement it in a folder of their own; the protocol (claim, take over, commit, release, recover) is the same on
 * both, and one contract suite runs against both.
 *
 * Effects are typed per store (`TEffect`): on DynamoDB a transaction item the handler stages, on PostgreSQL SQL the
 * handler runs inside the commit's transaction. Either way they commit together with the key's completion, fenced
 * by the lease, or not at all.
 *
 * Rules every implementation keeps (and the contract suite checks):
 * - Exactly one claim of a fresh key wins, however many race; the others learn the record that beat them.
 * - Every write that changes ownership names the lease token it expects: an owner whose lease was taken over can
 *   neither commit (none of its effects are written) nor release or abandon the new owner's claim.
 * - A write whose reply was lost and that is sent again recognises its own earlier success by its lease token.
 * - A record past its expiry is absent to every read, whatever the database's own deletion has done (`isExpired`).
 * - An unfinished recoverable operation (one in the recovery set: `recoverAt` set, in progress or released) never
 *   expires, logically or physically, until recovery or its client finishes it (commit or abandon): it has no
 *   `expiresAt`, no condition treats it as free, and nothing the database deletes on its own (DynamoDB's TTL, a
 *   sweeper job) may take it, however far behind recovery falls. Forgotten, a late retry would claim it fresh, with
 *   a new downstream key, and charge again. Commit and abandon give the record a full TTL from then.
 * - Takeovers keep the fingerprint and the downstream key; a fresh claim (absent or expired) gets new ones.
 */
/** How a release hands a recoverable operation back to recovery. */
export interface ReleaseOptions {
  /** Due for recovery no sooner than this from now (ms); never sooner than a lease. */
  readonly recoverAfterMs?: number;
}

export interface IdempotencyStore<TEffect> {
  /** The default lease a claim holds before a duplicate may take it over, in ms. */
  readonly leaseMs: number;
  /** How long a record lives (and replays), in seconds. */
  readonly ttlSeconds: number;
  /** The most effects one commit can carry with the key's completion. */
  readonly maxEffects: number;
  /**
   * The clock the store dates its records with, where it was given one: the engine dates an operation's checkpoint
   * entries by it too, so every time in one record is on one clock. Absent: the system clock.
   */
  readonly clock?: Clock;

  /**
   * Refuses an effect that is not this store's kind (SQL on DynamoDB, a transaction item on PostgreSQL, anything it
   * could not write) with an `EffectKindError` naming what it is. The types already refuse it under `strict`; this
   * is for JavaScript callers and casts. The operation's handle calls it in `stage()`, so the error is thrown from
   * the staging line, and the adapter releases the key as for any error of the work. The package's stores check
   * every effect again in `commit` and `claimAndCommit`, before they write anything: a caller of the store itself
   * stages through no handle. Optional, so that a store written before it still implements the contract.
   */
  checkEffect?(effect: unknown, index: number): void;

  /**
   * The most steps one operation's record holds ({@link checkpoint}). Absent on a store without checkpoints.
   */
  readonly maxSteps?: number;
  /**
   * The largest progress (its JSON, in bytes) one operation's record holds ({@link checkpoint}). Absent on a store
   * without checkpoints.
   */
  readonly maxCheckpointBytes?: number;

  /**
   * A recovery point: writes the operation's `progress` (the steps and their outcomes) into its record, and
   * `effects` (the step's local writes) in the same transaction, only while the lease is still this owner's, the
   * record is in progress and its progress is still the revision `progress` follows (`progress.revision - 1`, 0 for
   * none). A checkpoint sent again after its reply was lost recognises its own write and succeeds, writing nothing
   * twice. Optional, so that a store written before recovery points still implements the contract: an operation
   * that calls `step()` on such a store is refused (`StepUsageError`, `unsupported`) before the step runs.
   *
   * @throws {LeaseLostError} this owner no longer holds the record (or another checkpoint moved it on); nothing was
   *   written.
   * @throws {EffectConditionFailedError} one of the effects failed its own condition; nothing was written.
   * @throws {CheckpointTooLargeError} the progress is over `maxCheckpointBytes`; nothing was written.
   */
  checkpoint?(lease: Lease, progress: StepProgress, effects?: readonly TEffect[]): Promise<void>;

  /**
   * Claims `key` for a request with this fingerprint: acquired (a lease), or the record that was there (a replay, a
   * live owner in flight, or a mismatch of fingerprints).
   */
  claim(key: string, fingerprint: string, options?: ClaimOptions): Promise<ClaimOutcome>;

  /**
   * Commits the work: the effects and the key's completion with this response, in one transaction, only while the
   * lease is still this owner's. The record then lives (and replays) a full TTL from now.
   *
   * @throws {LeaseLostError} this owner no longer holds the record; nothing was written.
   * @throws {EffectConditionFailedError} one of the effects failed its own condition; nothing was written.
   * @throws {ResponseTooLargeError} the response can't be stored; nothing was written.
   */
  commit(lease: Lease, response: StoredResponse, effects?: readonly TEffect[]): Promise<void>;

  /**
   * Gives the key back after a transient failure, keeping the fingerprint and downstream key. A recoverable
   * operation becomes due for recovery one lease from now, or `recoverAfterMs` from now when that is longer (a
   * compensation that keeps failing backs off). False (and nothing changed) when the owner no longer holds it.
   */
  release(lease: Lease, options?: ReleaseOptions): Promise<boolean>;

  /**
   * Gives up on an operation recovery found no effect for: it leaves the recovery set, keeping its fingerprint and
   * downstream key for a full TTL from now. False (and nothing changed) when the owner no longer holds it.
   */
  abandon(lease: Lease): Promise<boolean>;

  /**
   * Recovery's way in: takes over an unfinished operation by its key (released, abandoned, or with its owner's lease
   * run out). Never creates a record, never disturbs a live owner.
   */
  resume(key: string, options?: ResumeOptions): Promise<ResumeOutcome>;

  /**
   * Recoverable operations due for recovery, oldest first, at most `limit`. Never a scan of every record. Recovery
   * (`recoverDue`) asks again for the next page after working through one, so an operation it has taken over
   * must stop being due (its `recoverAt` moves to its new lease's end) or leave the set.
   */
  findDue(options?: FindDueOptions): Promise<DueOperation[]>;

  /** The live record under `key`, or undefined when absent or past its expiry. */
  get(key: string): Promise<IdempotencyRecord | undefined>;

  /**
   * For work that is entirely local to this database: claim, effects and completion in one transaction. `build` may
   * run more than once and its result is discarded when the key turns out to be taken, so it must not have effects
   * of its own.
   */
  claimAndCommit(
    key: string,
    fingerprint: string,
    build: (context: OneShotContext) => Promise<{ response: StoredResponse; effects: readonly TEffect[] }>,
  ): Promise<OneShotOutcome>;
}

/**
 * The effect type of a store: `EffectOf<DynamoDbStore>` is a DynamoDB transaction item, `EffectOf<PostgresStore>`
 * SQL. Declare what a handler stages from the store it runs on (`WithIdempotency<typeof store>`,
 * `IdempotencyHandle<EffectOf<typeof store>>`), and swapping the store makes a staging line written for the other
 * one a compile error.
 */
export type EffectOf<TStore> = TStore extends IdempotencyStore<infer TEffect> ? TEffect : never;

/**
 * The outcomes of a claim. Expected cases are values; only the unexpected throws. `in_flight` carries a short
 * `retryAfterMs` to suggest (most originals finish long before their lease) and `leaseRemainingMs`, after which the
 * owner has finished or can be taken over (what a queue should wait before redelivering).
 */
export type ClaimOutcome =
  | { readonly kind: 'acquired'; readonly lease: Lease }
  | { readonly kind: 'replay'; readonly response: StoredResponse; readonly record: IdempotencyRecord }
  | {
      readonly kind: 'in_flight';
      readonly retryAfterMs: number;
      readonly leaseRemainingMs: number;
      readonly record: IdempotencyRecord;
    }
  | { readonly kind: 'mismatch'; readonly record: IdempotencyRecord };

/** The outcomes of a one-shot local operation. */
export type OneShotOutcome =
  | { readonly kind: 'committed'; readonly response: StoredResponse; readonly downstreamKey: string }
  | Exclude<ClaimOutcome, { kind: 'acquired' }>;

/**
 * The outcomes of {@link IdempotencyStore.resume}: recovery taking over an unfinished operation by its key.
 *
 * - `acquired`: it was released, abandoned, or its owner's lease ran out; this lease now owns it.
 * - `in_flight`: a live owner holds it; `retryAfterMs` is what is left of that owner's lease.
 * - `completed`: it committed; nothing to recover.
 * - `absent`: no live record under the key (never claimed, expired, or another generation than the one expected).
 */
export type ResumeOutcome =
  | { readonly kind: 'acquired'; readonly lease: Lease }
  | { readonly kind: 'in_flight'; readonly retryAfterMs: number; readonly record: IdempotencyRecord }
  | { readonly kind: 'completed'; readonly record: IdempotencyRecord }
  | { readonly kind: 'absent' };

export interface ResumeOptions {
  /**
   * Resume only the generation whose downstream key is this one: a witness of an outside effect (a webhook about a
   * charge) names the key the effect was made under, and must not complete a later generation of the same client
   * key (reused after the first one expired) with it.
   */
  readonly downstreamKey?: string;
}

export interface FindDueOptions {
  /** At most this many operations. Default 100. */
  readonly limit?: number;
}

/** A recoverable operation due for recovery, from the recovery set. */
export interface DueOperation {
  readonly key: string;
  /**
   * Epoch ms since when it has been due this time: the index's order. Every takeover and release moves it a lease
   * on, so it says nothing about how long recovery has been failing to finish the operation.
   */
  readonly recoverAt: number;
  /**
   * Epoch ms when the operation was first due, where the store can tell from its recovery set alone: its first
   * claim's `createdAt` (kept by every takeover and release) plus the store's lease, never later than `recoverAt`.
   * PostgreSQL says (its partial index sits on the table's row); DynamoDB's recovery index is keys only (a deployed
   * index's projection can't be changed in place), so it leaves this out, and `recoverDue` learns it from the record.
   */
  readonly firstDueAt?: number;
}

/** What a one-shot operation's builder sees: the identifiers of the generation it would commit. */
export interface OneShotContext {
  readonly downstreamKey: string;
  readonly attempt: number;
  readonly now: number;
}

export interface ClaimOptions {
  /**
   * Wait up to this long for an in-flight original to finish (polling with backoff) instead of answering
   * `in_flight` at once. Keep it within the function's remaining time. Default 0: don't wait.
   */
  readonly waitMs?: number;
  /**
   * Track the operation in the recovery set until it completes or is abandoned ({@link IdempotencyStore.findDue}):
   * for work whose effect lives in another system (a charge), so that an attempt whose client never comes back is
   * still finished, or given up, by recovery. Default false.
   */
  readonly recoverable?: boolean;
  /**
   * This claim's lease, in ms, when it must be longer than the store's (a Lambda function with more time left than
   * the store's lease: the adapters pass its remaining time plus a margin). Never shorter than the store's lease.
   */
  readonly leaseMs?: number;
}

export const DEFAULT_LEASE_SECONDS = 60;
export const DEFAULT_TTL_SECONDS = 24 * 60 * 60;

/**
 * Rounds of claim/takeover against a record that keeps changing under us before giving up as contended.
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export const MAX_CLAIM_ROUNDS = 5;
