import { type Clock, type IdSource, randomIds, systemClock } from './clock.js';
import type {
  ClaimOptions,
  ClaimOutcome,
  DueOperation,
  FindDueOptions,
  IdempotencyStore,
  OneShotContext,
  OneShotOutcome,
  ReleaseOptions,
  ResumeOptions,
  ResumeOutcome,
} from './contract.js';
import { isExpired, isOwnCompletion, leaseOf } from './decide.js';
import type { ClaimWriteOutcome, IdempotencyDriver } from './driver.js';
import { CheckpointTooLargeError, IdempotencyError, LeaseLostError, TooManyEffectsError } from './errors.js';
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
} from './ownership.js';
import { type IdempotencyRecord, type Lease, RecordStatus, type StoredResponse } from './record.js';
import { DEFAULT_MAX_CHECKPOINT_BYTES, progressBytes } from './step-runner.js';
import { DEFAULT_MAX_STEPS, type StepProgress } from './steps.js';

/**
 * The idempotency protocol over a database's driver: the one implementation of the store contract, which
 * `DynamoDbStore` and `PostgresStore` are too (each a `DriverStore` over its driver). The driver makes the conditional
 * writes; this decides which to make, with what record, and what the answer means:
 *
 * - claim: a fresh write, then, while the record keeps changing under it, a takeover or another fresh write, decided
 *   by the engine's pure rule on the record each write met; a duplicate in flight is waited for when asked;
 * - commit, release, abandon: one write each, fenced by the lease token, its own earlier success recognised by it;
 * - resume: recovery's takeover by key, never creating a record, never disturbing a live owner;
 * - claimAndCommit: the one-shot rounds, the completed record and the effects in one write;
 * - get and findDue: the driver's read and index, with expiry decided here.
 *
 * Lease and TTL come from the options (checked here: a positive lease, a TTL at least as long), as do the clock and
 * the identifiers; every time a driver sees is this clock's.
 *
 * @example
 * const store = new DriverStore(new MyDatabaseDriver(client), { leaseSeconds: 60, ttlSeconds: 24 * 60 * 60 });
 * const outcome = await store.claim(scopedKey(scope), fingerprint(request));
 * if (outcome.kind === 'acquired') await store.commit(outcome.lease, response, [effect]);
 */
export class DriverStore<TEffect> implements IdempotencyStore<TEffect> {
  readonly leaseMs: number;
  readonly ttlSeconds: number;
  readonly maxEffects: number;
  /** Set when the driver has checkpoints (recovery points); absent, `step()` is refused before it runs. */
  readonly maxSteps?: number;
  readonly maxCheckpointBytes?: number;
  /**
   * A recovery point, when the driver has them: the progress and the step's effects in one of the driver's
   * transactions, fenced by the lease token and the revision the progress follows. One sent again after its reply
   * was lost meets its own revision under its own lease token, and succeeds, writing nothing twice.
   *
   * @throws {LeaseLostError} this owner no longer holds the record in progress at that revision; nothing was written.
   * @throws {EffectConditionFailedError} one of the effects failed its own condition; nothing was written.
   * @throws {TooManyEffectsError | CheckpointTooLargeError} over the driver's limits; nothing was written.
   */
  readonly checkpoint?: (lease: Lease, progress: StepProgress, effects?: readonly TEffect[]) => Promise<void>;
  private readonly driver: IdempotencyDriver<TEffect>;
  readonly clock: Clock;
  private readonly ids: IdSource;
  private readonly maxResponseBytes: number;
  /** The writes and read the engine's claim and resume rounds drive. */
  private readonly ownership: OwnershipWrites;
  /** What the one-shot rounds make records with, and read. */
  private readonly oneShot: OneShotStore;

  constructor(driver: IdempotencyDriver<TEffect>, options: StoreLifetimeOptions = {}) {
    const { leaseMs, ttlSeconds } = storeTimings(options);
    this.driver = driver;
    this.leaseMs = leaseMs;
    this.ttlSeconds = ttlSeconds;
    this.maxEffects = driver.maxEffects;
    this.maxResponseBytes = driver.maxResponseBytes;
    this.clock = options.clock ?? systemClock;
    this.ids = options.ids ?? randomIds;
    if (typeof driver.checkpoint === 'function') {
      this.maxSteps = DEFAULT_MAX_STEPS;
      this.maxCheckpointBytes = driver.maxCheckpointBytes ?? DEFAULT_MAX_CHECKPOINT_BYTES;
      this.checkpoint = (lease, progress, effects = []) => this.writeCheckpoint(lease, progress, effects);
    }
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
  }

  async claim(key: string, fingerprint: string, options: ClaimOptions = {}): Promise<ClaimOutcome> {
    return claimRounds(this.ownership, key, fingerprint, options);
  }

  checkEffect(effect: unknown, index: number): void {
    this.driver.checkEffect(effect, index);
  }

  /**
   * Commits the work: the effects and the key's completion in one of the driver's transactions, fenced by the lease
   * token. A commit sent again after its reply was lost meets its own completion and succeeds, writing nothing twice.
   *
   * @throws {LeaseLostError} this owner no longer holds the record; nothing was written.
   * @throws {EffectConditionFailedError} one of the effects failed its own condition; nothing was written.
   * @throws {ResponseTooLargeError} the response can't be stored; nothing was written.
   * @throws {TooManyEffectsError} more effects than one commit carries; nothing was written.
   */
  async commit(lease: Lease, response: StoredResponse, effects: readonly TEffect[] = []): Promise<void> {
    this.checkEffects(effects);
    assertStorable(response, this.responseLimit(lease));
    if (effects.length > this.maxEffects) throw new TooManyEffectsError(this.maxEffects);
    const now = this.clock.now();
    const expiresAt = expiryFrom(now, this.ttlSeconds);
    const written = await this.driver.commit({ lease, response, effects, now, expiresAt });
    if (written.kind === 'written') return;
    // Sent again after its reply was lost, it meets the completion it wrote: its own, while that completion lives. One
    // past its expiry is absent, as to every read: the key may have a new generation, and this lease holds nothing.
    const record = written.record;
    if (isOwnCompletion(record, lease) && record && !isExpired(record, this.clock.now())) return;
    throw new LeaseLostError(lease.key, record, { cause: written.cause });
  }

  /**
   * Gives the key back after a transient failure, fenced by the lease token; the fingerprint and downstream key stay.
   * A recoverable operation becomes due for recovery one lease from now (or `recoverAfterMs`, when longer), and has
   * no expiry until it is finished.
   * False (and nothing changed) when this owner no longer holds it; true again for a release already made.
   */
  async release(lease: Lease, options: ReleaseOptions = {}): Promise<boolean> {
    const now = this.clock.now();
    const recoverAfterMs = Math.max(this.leaseMs, options.recoverAfterMs ?? 0);
    return this.endLease(lease, RecordStatus.Released, now, {
      // The expiry goes too: a record claimed before unfinished recoverable operations lost theirs may carry one.
      ...(lease.recoverable ? { recoverAt: now + recoverAfterMs, expiresAt: null } : {}),
    });
  }

  /**
   * Gives up on an operation recovery found no effect for, fenced by the lease token: it leaves the recovery set and
   * keeps its fingerprint and downstream key for a full TTL from now. False (and nothing changed) when this owner no
   * longer holds it.
   */
  async abandon(lease: Lease): Promise<boolean> {
    const now = this.clock.now();
    return this.endLease(lease, RecordStatus.Abandoned, now, {
      recoverAt: null,
      expiresAt: expiryFrom(now, this.ttlSeconds),
    });
  }

  async resume(key: string, options: ResumeOptions = {}): Promise<ResumeOutcome> {
    return resumeRounds(this.ownership, key, options);
  }

  async findDue(options: FindDueOptions = {}): Promise<DueOperation[]> {
    return this.driver.findDue({ now: this.clock.now(), limit: options.limit ?? 100, leaseMs: this.leaseMs });
  }

  /** The live record under `key`, or undefined when absent or past its expiry. */
  async get(key: string): Promise<IdempotencyRecord | undefined> {
    const record = await this.driver.read(key);
    return record === undefined || isExpired(record, this.clock.now()) ? undefined : record;
  }

  async claimAndCommit(
    key: string,
    fingerprint: string,
    build: (context: OneShotContext) => Promise<{ response: StoredResponse; effects: readonly TEffect[] }>,
  ): Promise<OneShotOutcome> {
    return oneShotRounds<TEffect>(this.oneShot, key, fingerprint, build, async ({ record, previous, effects, now }) => {
      if (effects.length > this.maxEffects) throw new TooManyEffectsError(this.maxEffects);
      this.checkEffects(effects);
      const written = await this.driver.commitOneShot({ record, previous, effects, now });
      if (written.kind === 'written') return { kind: 'committed' };
      // Sent again after its reply was lost, it meets the completion it wrote: its own.
      return isOwnCompletion(written.record, record) ? { kind: 'committed' } : { kind: 'met', record: written.record };
    });
  }

  /** A response's room: the driver's limit, less the progress already in the record where one record is capped. */
  private responseLimit(lease: Lease): number {
    const cap = this.driver.maxRecordBytes;
    if (cap === undefined || lease.progress === undefined) return this.maxResponseBytes;
    return Math.min(this.maxResponseBytes, cap - progressBytes(lease.progress));
  }

  private async writeCheckpoint(lease: Lease, progress: StepProgress, effects: readonly TEffect[]): Promise<void> {
    const driver = this.driver;
    if (driver.checkpoint === undefined) throw new IdempotencyError('this driver has no checkpoints');
    this.checkEffects(effects);
    if (effects.length > this.maxEffects) throw new TooManyEffectsError(this.maxEffects);
    const bytes = progressBytes(progress);
    const limit = this.maxCheckpointBytes ?? DEFAULT_MAX_CHECKPOINT_BYTES;
    const step = progress.steps.at(-1)?.name ?? '';
    if (bytes > limit) throw new CheckpointTooLargeError(step, bytes, limit);
    const written = await driver.checkpoint({ lease, progress, effects, now: this.clock.now() });
    if (written.kind === 'written') return;
    // Sent again after its reply was lost, it meets what it wrote: our lease token, in progress, at our revision.
    const record = written.record;
    if (
      record?.leaseToken === lease.leaseToken &&
      record.status === RecordStatus.InProgress &&
      record.progress?.revision === progress.revision
    ) {
      return;
    }
    throw new LeaseLostError(lease.key, record, { cause: written.cause });
  }

  private recordSource(now: number): RecordSource {
    return { now, ids: this.ids, ttlSeconds: this.ttlSeconds };
  }

  private async putFresh(key: string, fingerprint: string, claim: ClaimSettings): Promise<Seen> {
    const now = this.clock.now();
    const record = freshClaimRecord(key, fingerprint, claim, this.recordSource(now));
    return seenOf(await this.driver.putFresh({ record, now }), record, false);
  }

  private async takeOver(previous: IdempotencyRecord, now: number, claim: ClaimSettings): Promise<Seen> {
    const record = takeoverRecord(previous, claim, this.recordSource(now));
    return seenOf(await this.driver.takeOver({ previous, record, now }), record, true);
  }

  private async endLease(
    lease: Lease,
    status: typeof RecordStatus.Released | typeof RecordStatus.Abandoned,
    now: number,
    change: { recoverAt?: number | null; expiresAt?: number | null },
  ): Promise<boolean> {
    const written = await this.driver.endLease({ lease, status, now, ...change });
    if (written.kind === 'written') return true;
    // Sent again after its reply was lost, it meets what it wrote: the same token, the new status.
    return written.record?.leaseToken === lease.leaseToken && written.record.status === status;
  }

  /** Every effect of a commit, checked before anything is written. */
  private checkEffects(effects: readonly unknown[]): void {
    for (const [index, effect] of effects.entries()) this.driver.checkEffect(effect, index);
  }
}

/**
 * A claim's write, as the rounds read it: a write that met a record carrying its own lease token was sent again after
 * its reply was lost, and met what its first sending wrote. That is this claim, not another owner's.
 */
function seenOf(written: ClaimWriteOutcome, record: IdempotencyRecord, takeover: boolean): Seen {
  if (written.kind === 'written' || (written.kind === 'met' && written.record?.leaseToken === record.leaseToken)) {
    return { kind: 'acquired', lease: leaseOf(record, takeover) };
  }
  return written.kind === 'held' ? written : { kind: 'record', record: written.record };
}
