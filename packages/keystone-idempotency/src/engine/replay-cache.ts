import { type Clock, systemClock } from './clock.js';
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
import { decide } from './decide.js';
import { ConfigurationError } from './errors.js';
import { type IdempotencyRecord, type Lease, RecordStatus, type StoredResponse } from './record.js';
import type { StepProgress } from './steps.js';

export interface ReplayCacheOptions {
  /** At most this many records are kept; the least recently used goes first. Default 1000 (Powertools' default). */
  readonly maxEntries?: number;
  /**
   * At most this many bytes of stored responses (bodies and headers) are kept, so a function's memory stays bounded
   * whatever its responses weigh. A response larger than this on its own is never cached. Default 16 MiB.
   */
  readonly maxBytes?: number;
  /** The clock expiry is judged by: the store's own, when it was given one. Default the system clock. */
  readonly clock?: Clock;
}

const DEFAULT_MAX_ENTRIES = 1000;
const DEFAULT_MAX_BYTES = 16 * 1024 * 1024;

interface Entry {
  readonly record: IdempotencyRecord & { readonly response: StoredResponse };
  readonly bytes: number;
}

/**
 * A store that answers replays of completed operations from memory: a warm function that already saw a key's
 * completion (it committed it, or replayed it once) answers the next duplicate with no database request at all.
 * Powertools' `useLocalCache`, as a decorator of any store (DynamoDB, PostgreSQL), so that every adapter (HTTP, SQS,
 * `makeIdempotent`) gets it by being given the wrapped store.
 *
 * Why it is safe: a completed record never changes until it expires. Its response, fingerprint and downstream key
 * are fixed by the commit, and nothing but expiry ends it (a later request under the key after that is a new
 * operation). So the cache holds completed records only, never an in-progress, released or abandoned one (those
 * change under other owners), and treats one as absent from the moment it expires, by the same rule the stores
 * apply (`decide`). A cached record answers exactly as the store would: a replay for the same fingerprint, a
 * mismatch for another.
 *
 * What fills it: a record the store returned on a claim (a replay, or a mismatch against a completed record), and
 * every successful `commit`, whose completed record is known without reading it back (its expiry is taken as a full
 * TTL from just before the commit, never later than the store's). A one-shot `claimAndCommit` is cached on its
 * first replay, since its outcome does not carry the whole record. Everything else (release, recovery, `get`) goes
 * to the store unchanged.
 *
 * What it can't know: a record deleted or rewritten behind the engine's back (by hand, or by a process that does
 * not go through a store) is still replayed from memory until it expires or is evicted. Don't cache where that
 * happens.
 *
 * @example
 * const store = new ReplayCache(new DynamoDbStore({ client, tableName: 'idempotency' }), { maxEntries: 500 });
 * export const handler = makeIdempotent(book, { store, name: 'book-shipment', key: (event) => event.detail.orderId });
 */
export class ReplayCache<TEffect> implements IdempotencyStore<TEffect> {
  /** Least recently used first: a Map iterates in insertion order, and a hit is moved to the end. */
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  private readonly maxEntries: number;
  private readonly maxBytes: number;
  /** The store's clock (or the one given): the cache judges expiry by it, and the engine dates checkpoints by it. */
  readonly clock: Clock;

  constructor(
    /** The store every miss, and every write, goes to. */
    readonly store: IdempotencyStore<TEffect>,
    options: ReplayCacheOptions = {},
  ) {
    this.maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
    this.maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    if (!Number.isInteger(this.maxEntries) || this.maxEntries < 1) {
      throw new ConfigurationError(`maxEntries must be a whole number of at least 1, got ${options.maxEntries}`);
    }
    if (!(this.maxBytes > 0)) throw new ConfigurationError(`maxBytes must be positive, got ${options.maxBytes}`);
    this.clock = options.clock ?? store.clock ?? systemClock;
    // Checkpoints go straight to the store (an unfinished operation is never cached), where the store has them.
    if (typeof store.checkpoint === 'function') {
      const checkpoint = store.checkpoint.bind(store);
      this.checkpoint = (lease, progress, effects) => checkpoint(lease, progress, effects);
    }
  }

  readonly checkpoint?: (lease: Lease, progress: StepProgress, effects?: readonly TEffect[]) => Promise<void>;

  get maxSteps(): number | undefined {
    return this.store.maxSteps;
  }

  get maxCheckpointBytes(): number | undefined {
    return this.store.maxCheckpointBytes;
  }

  get leaseMs(): number {
    return this.store.leaseMs;
  }

  get ttlSeconds(): number {
    return this.store.ttlSeconds;
  }

  get maxEffects(): number {
    return this.store.maxEffects;
  }

  checkEffect(effect: unknown, index: number): void {
    this.store.checkEffect?.(effect, index);
  }

  /** How many records are held now. */
  get size(): number {
    return this.entries.size;
  }

  async claim(key: string, fingerprint: string, options?: ClaimOptions): Promise<ClaimOutcome> {
    const cached = this.answer(key, fingerprint);
    if (cached) return cached;
    const outcome = await this.store.claim(key, fingerprint, options);
    if (outcome.kind === 'replay' || outcome.kind === 'mismatch') this.remember(outcome.record);
    return outcome;
  }

  async commit(lease: Lease, response: StoredResponse, effects?: readonly TEffect[]): Promise<void> {
    // Read before the commit: the store sets the record's expiry from its own, later, reading of the same clock.
    const committedBy = this.clock.now();
    await this.store.commit(lease, response, effects);
    this.remember({
      key: lease.key,
      status: RecordStatus.Completed,
      fingerprint: lease.fingerprint,
      leaseToken: lease.leaseToken,
      leaseExpiresAt: lease.leaseExpiresAt,
      expiresAt: Math.floor(committedBy / 1000) + this.store.ttlSeconds,
      downstreamKey: lease.downstreamKey,
      attempt: lease.attempt,
      createdAt: lease.createdAt,
      response,
    });
  }

  async claimAndCommit(
    key: string,
    fingerprint: string,
    build: (context: OneShotContext) => Promise<{ response: StoredResponse; effects: readonly TEffect[] }>,
  ): Promise<OneShotOutcome> {
    const cached = this.answer(key, fingerprint);
    if (cached) return cached;
    const outcome = await this.store.claimAndCommit(key, fingerprint, build);
    if (outcome.kind === 'replay' || outcome.kind === 'mismatch') this.remember(outcome.record);
    return outcome;
  }

  release(lease: Lease, options?: ReleaseOptions): Promise<boolean> {
    return this.store.release(lease, options);
  }

  abandon(lease: Lease): Promise<boolean> {
    return this.store.abandon(lease);
  }

  resume(key: string, options?: ResumeOptions): Promise<ResumeOutcome> {
    return this.store.resume(key, options);
  }

  findDue(options?: FindDueOptions): Promise<DueOperation[]> {
    return this.store.findDue(options);
  }

  get(key: string): Promise<IdempotencyRecord | undefined> {
    return this.store.get(key);
  }

  /** Forgets every record (the store is untouched). */
  clear(): void {
    this.entries.clear();
    this.bytes = 0;
  }

  /** The store's own answer for a cached completed record, or undefined: not cached, or expired (then dropped). */
  private answer(key: string, fingerprint: string): Extract<ClaimOutcome, { kind: 'replay' | 'mismatch' }> | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    const decision = decide(entry.record, fingerprint, this.clock.now());
    if (decision.kind !== 'replay' && decision.kind !== 'mismatch') {
      // Only `fresh` can come of a completed record: it expired, and the next claim is a new operation.
      this.drop(key, entry);
      return undefined;
    }
    this.entries.delete(key);
    this.entries.set(key, entry);
    return decision;
  }

  private remember(record: IdempotencyRecord): void {
    const { response } = record;
    if (record.status !== RecordStatus.Completed || response === undefined) return;
    // Only a record whose end is known: a completed one always has an expiry and is out of the recovery set.
    if (record.expiresAt === undefined || record.recoverAt !== undefined) return;
    if (decide(record, record.fingerprint, this.clock.now()).kind !== 'replay') return;
    const bytes = sizeOf(response);
    const previous = this.entries.get(record.key);
    if (previous) this.drop(record.key, previous);
    if (bytes > this.maxBytes) return;
    this.entries.set(record.key, { record: { ...record, response }, bytes });
    this.bytes += bytes;
    for (const [key, entry] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.bytes <= this.maxBytes) break;
      this.drop(key, entry);
    }
  }

  private drop(key: string, entry: Entry): void {
    this.entries.delete(key);
    this.bytes -= entry.bytes;
  }
}

/** A response's weight in memory, near enough: its body and headers as UTF-16 strings. */
function sizeOf(response: StoredResponse): number {
  let chars = response.body.length;
  for (const [name, value] of Object.entries(response.headers)) chars += name.length + value.length;
  return chars * 2;
}
