import type { Clock, IdSource } from './clock.js';
import {
  type ClaimOptions,
  type ClaimOutcome,
  DEFAULT_LEASE_SECONDS,
  DEFAULT_TTL_SECONDS,
  MAX_CLAIM_ROUNDS,
  type OneShotContext,
  type OneShotOutcome,
  type ResumeOptions,
  type ResumeOutcome,
} from './contract.js';
import { type Decision, decide, isExpired } from './decide.js';
import { ConfigurationError, ContendedError, ResponseTooLargeError } from './errors.js';
import { assertStorableKey } from './key.js';
import { type IdempotencyRecord, type Lease, RecordStatus, type StoredResponse } from './record.js';

/**
 * How a record changes owner, the same on every store: the rounds of a claim and of recovery's resume, driven by the
 * two conditional writes a driver makes in its own terms (a fresh claim of an absent or expired key; a takeover of a
 * released, abandoned or run-out record, conditioned on the lease token it saw) and by its read. The decision between
 * rounds is the engine's pure `decide`, so every store answers every race alike; only the writes differ.
 * `DriverStore` (driver-store.ts) wires these rounds to a driver, once for every store.
 */

/** How one claim holds its record: tracked for recovery or not, and for how long. */
export interface ClaimSettings {
  readonly recoverable: boolean;
  readonly leaseMs: number;
}

/**
 * What a conditional write told its store: it owns the record now, or here is the record that stopped it (undefined
 * when it vanished between the check and the reply). A store recognises its own earlier write (a reply lost and the
 * write sent again) by its lease token, and answers `acquired` for it.
 */
export type Seen =
  | { readonly kind: 'acquired'; readonly lease: Lease }
  | { readonly kind: 'record'; readonly record: IdempotencyRecord | undefined }
  /**
   * Another session held the record past the store's lock timeout (a commit under way, or one whose connection went
   * silent); `record` is what is committed (even past its expiry). Never written over: a duplicate is told to come back.
   */
  | { readonly kind: 'held'; readonly record: IdempotencyRecord | undefined };

/** A store's ownership writes and its read, which the rounds below drive. */
export interface OwnershipWrites {
  readonly clock: Clock;
  /** The store's own lease, for recovery's takeovers and as the least a claim holds. */
  readonly leaseMs: number;
  /** Claims a key nobody holds: succeeds only if the record is absent or expired. */
  putFresh(key: string, fingerprint: string, claim: ClaimSettings): Promise<Seen>;
  /** Takes `previous` over, conditioned on it being exactly as seen; keeps its fingerprint and downstream key. */
  takeOver(previous: IdempotencyRecord, now: number, claim: ClaimSettings): Promise<Seen>;
  /** The live record under `key`, read strongly consistently. */
  get(key: string): Promise<IdempotencyRecord | undefined>;
}

const POLL_START_MS = 50;
const POLL_MAX_MS = 1000;

/**
 * The rounds of a claim: write, read what stopped the write, decide, and write again while the record keeps changing
 * under us (a few rounds settle any real race; more is contention). A duplicate in flight is waited for, polling
 * with backoff, up to `waitMs`.
 */
export async function claimRounds(
  store: OwnershipWrites,
  key: string,
  fingerprint: string,
  options: ClaimOptions,
): Promise<ClaimOutcome> {
  // Before any write: a key the store would keep as another (a lone surrogate becomes U+FFFD) would join that one.
  assertStorableKey(key);
  const waitMs = options.waitMs ?? 0;
  const claim = { recoverable: options.recoverable ?? false, leaseMs: leaseFor(store.leaseMs, options) };
  let waited = 0;
  let pollMs = POLL_START_MS;
  let writes = 1;
  let seen = await store.putFresh(key, fingerprint, claim);
  for (;;) {
    if (seen.kind === 'acquired') return { kind: 'acquired', lease: seen.lease };
    const now = store.clock.now();
    let decision = decide(seen.record, fingerprint, now);
    if (seen.kind === 'held' && (decision.kind === 'fresh' || decision.kind === 'takeover')) {
      // What is committed would have us write, but the session holding the row may still commit over it: in flight.
      if (seen.record === undefined) throw new ContendedError(key);
      decision = heldInFlight(seen.record, now);
    }
    if (decision.kind === 'fresh' || decision.kind === 'takeover') {
      // The record changed between our write and our reading of it; a few rounds settle any real race.
      if (++writes > MAX_CLAIM_ROUNDS) throw new ContendedError(key);
      seen =
        decision.kind === 'fresh'
          ? await store.putFresh(key, fingerprint, claim)
          : await store.takeOver(decision.record, now, claim);
      continue;
    }
    if (decision.kind !== 'in_flight' || waited + pollMs > waitMs) return decision;
    // Bounded by time actually slept, not by the (injectable) clock, so a frozen test clock can't hang here.
    await sleep(pollMs);
    waited += pollMs;
    pollMs = Math.min(pollMs * 2, POLL_MAX_MS);
    seen = { kind: 'record', record: await store.get(key) };
  }
}

/** How soon to come back to a record another session holds: soon, as for any live owner (most finish in ms). */
const HELD_RETRY_AFTER_MS = 1000;

function heldInFlight(record: IdempotencyRecord, now: number): Extract<Decision, { kind: 'in_flight' }> {
  return {
    kind: 'in_flight',
    retryAfterMs: HELD_RETRY_AFTER_MS,
    leaseRemainingMs: Math.max(HELD_RETRY_AFTER_MS, record.leaseExpiresAt - now),
    record,
  };
}

/**
 * The rounds of recovery's resume: take over an unfinished operation by its key, never creating a record and never
 * disturbing a live owner. Recovery's own lease is recoverable: if recovery dies half-way, the operation stays due.
 */
export async function resumeRounds(
  store: OwnershipWrites,
  key: string,
  options: ResumeOptions,
): Promise<ResumeOutcome> {
  assertStorableKey(key);
  let record = await store.get(key);
  for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
    if (record === undefined) return { kind: 'absent' };
    const now = store.clock.now();
    if (options.downstreamKey !== undefined && record.downstreamKey !== options.downstreamKey) {
      return { kind: 'absent' };
    }
    const decision = decide(record, record.fingerprint, now);
    switch (decision.kind) {
      case 'fresh':
      case 'mismatch': // cannot happen: the record's own fingerprint
        return { kind: 'absent' };
      case 'replay':
        return { kind: 'completed', record };
      case 'in_flight':
        return { kind: 'in_flight', retryAfterMs: record.leaseExpiresAt - now, record };
      case 'takeover': {
        const seen = await store.takeOver(record, now, { recoverable: true, leaseMs: store.leaseMs });
        if (seen.kind === 'acquired') return seen;
        if (seen.kind === 'held') {
          const { retryAfterMs } = heldInFlight(seen.record ?? record, now);
          return { kind: 'in_flight', retryAfterMs, record: seen.record ?? record };
        }
        record = seen.record && !isExpired(seen.record, store.clock.now()) ? seen.record : undefined;
      }
    }
  }
  throw new ContendedError(key);
}

/** What a store gives the rounds of `claimAndCommit`: how it makes records, its limit on a response, and its read. */
export interface OneShotStore {
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly ttlSeconds: number;
  readonly maxResponseBytes: number;
  /** The live record under `key`, read strongly consistently. */
  get(key: string): Promise<IdempotencyRecord | undefined>;
}

/**
 * One try of `claimAndCommit`, in the store's own terms: write `record` (completed) and the effects in one
 * transaction, conditioned on the key being free (no `previous`) or on `previous` being exactly as seen. Answers
 * `committed` (its own earlier write included, when a reply was lost and it was sent again), or the record that
 * stopped it (undefined: read it).
 */
export type OneShotWrite<TEffect> = (attempt: {
  readonly record: IdempotencyRecord;
  readonly previous: IdempotencyRecord | undefined;
  readonly effects: readonly TEffect[];
  readonly now: number;
}) => Promise<
  { readonly kind: 'committed' } | { readonly kind: 'met'; readonly record: IdempotencyRecord | undefined }
>;

/**
 * The rounds of `claimAndCommit`, the same on every store: decide on the record the last write met, build the
 * response and effects under the attempt's downstream key (a takeover keeps the previous attempt's), write them with
 * the completed record in one transaction, and go again while the record keeps changing under us.
 */
export async function oneShotRounds<TEffect>(
  store: OneShotStore,
  key: string,
  fingerprint: string,
  build: (context: OneShotContext) => Promise<{ response: StoredResponse; effects: readonly TEffect[] }>,
  write: OneShotWrite<TEffect>,
): Promise<OneShotOutcome> {
  assertStorableKey(key);
  let existing: IdempotencyRecord | undefined;
  for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
    const now = store.clock.now();
    const decision = existing === undefined ? ({ kind: 'fresh' } as const) : decide(existing, fingerprint, now);
    if (decision.kind !== 'fresh' && decision.kind !== 'takeover') return decision;
    const previous = decision.kind === 'takeover' ? decision.record : undefined;
    const downstreamKey = previous?.downstreamKey ?? store.ids.downstreamKey();
    const attempt = (previous?.attempt ?? 0) + 1;
    const { response, effects } = await build({ downstreamKey, attempt, now });
    assertStorable(response, store.maxResponseBytes);
    const record = oneShotRecord(key, fingerprint, { previous, downstreamKey, number: attempt }, response, {
      now,
      ids: store.ids,
      ttlSeconds: store.ttlSeconds,
    });
    const written = await write({ record, previous, effects, now });
    if (written.kind === 'committed') return { kind: 'committed', response, downstreamKey };
    existing = written.record ?? (await store.get(key));
  }
  throw new ContendedError(key);
}

/** What every store is configured with for its leases and records, and the clock and ids it makes them with. */
export interface StoreLifetimeOptions {
  /** How long a claim is held before a duplicate may take it over. Must exceed the function's timeout. */
  readonly leaseSeconds?: number;
  /** How long a record lives (and replays). Default 24 hours. */
  readonly ttlSeconds?: number;
  readonly clock?: Clock;
  readonly ids?: IdSource;
}

/** A store's lease and TTL, from its options: the lease positive, the TTL at least the lease. */
export function storeTimings(options: StoreLifetimeOptions): {
  readonly leaseMs: number;
  readonly ttlSeconds: number;
} {
  const leaseSeconds = options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  const ttlSeconds = options.ttlSeconds ?? DEFAULT_TTL_SECONDS;
  if (!(leaseSeconds > 0)) throw new ConfigurationError(`leaseSeconds must be positive, got ${leaseSeconds}`);
  if (!(ttlSeconds >= leaseSeconds)) {
    throw new ConfigurationError(`ttlSeconds (${ttlSeconds}) must be at least leaseSeconds (${leaseSeconds})`);
  }
  return { leaseMs: leaseSeconds * 1000, ttlSeconds };
}

/** What a store writes its records with: its clock's now, its ids and its TTL. */
export interface RecordSource {
  readonly now: number;
  readonly ids: IdSource;
  readonly ttlSeconds: number;
}

/** The record a fresh claim writes: in progress under a new lease token and downstream key, attempt 1. */
export function freshClaimRecord(
  key: string,
  fingerprint: string,
  claim: ClaimSettings,
  { now, ids, ttlSeconds }: RecordSource,
): IdempotencyRecord {
  const leaseExpiresAt = now + claim.leaseMs;
  return {
    key,
    status: RecordStatus.InProgress,
    fingerprint,
    leaseToken: ids.leaseToken(),
    leaseExpiresAt,
    downstreamKey: ids.downstreamKey(),
    attempt: 1,
    createdAt: now,
    ...(claim.recoverable
      ? // Due for recovery when the lease runs out (by then a live owner has either finished or died), and with no
        // expiry until it is finished.
        { recoverAt: leaseExpiresAt }
      : // Never before the lease ends, or an expiry mid-lease would reopen the key under its owner.
        { expiresAt: Math.max(expiryFrom(now, ttlSeconds), Math.ceil(leaseExpiresAt / 1000)) }),
  };
}

/**
 * The record a takeover writes over `previous`: in progress under a new lease token, the same fingerprint and
 * downstream key, the next attempt.
 */
export function takeoverRecord(
  previous: IdempotencyRecord,
  claim: ClaimSettings,
  { now, ids, ttlSeconds }: RecordSource,
): IdempotencyRecord {
  const leaseExpiresAt = now + claim.leaseMs;
  // A recoverable operation stays recoverable (an abandoned one becomes so again when its client comes back), and
  // has no expiry until it is finished.
  const tracked = claim.recoverable || previous.recoverAt !== undefined;
  const { expiresAt: previousExpiry, recoverAt: _movedBelow, ...kept } = previous;
  return {
    ...kept,
    status: RecordStatus.InProgress,
    leaseToken: ids.leaseToken(),
    leaseExpiresAt,
    attempt: previous.attempt + 1,
    ...(tracked
      ? { recoverAt: leaseExpiresAt }
      : // Alive at least as long as the new lease, or an expiry mid-lease would reopen the key.
        { expiresAt: Math.max(previousExpiry ?? expiryFrom(now, ttlSeconds), Math.ceil(leaseExpiresAt / 1000)) }),
  };
}

/**
 * The record `claimAndCommit` writes: completed at once, with the response, under the downstream key and attempt its
 * effects were built with (a takeover's keeps the previous attempt's downstream key and creation time).
 */
export function oneShotRecord(
  key: string,
  fingerprint: string,
  attempt: { readonly previous?: IdempotencyRecord; readonly downstreamKey: string; readonly number: number },
  response: StoredResponse,
  { now, ids, ttlSeconds }: RecordSource,
): IdempotencyRecord {
  return {
    key,
    status: RecordStatus.Completed,
    fingerprint,
    leaseToken: ids.leaseToken(),
    leaseExpiresAt: now,
    // A full TTL from now, like every commit: a completed operation replays for its whole TTL.
    expiresAt: expiryFrom(now, ttlSeconds),
    downstreamKey: attempt.downstreamKey,
    attempt: attempt.number,
    createdAt: attempt.previous?.createdAt ?? now,
    response,
  };
}

/** A claim's lease: the store's, or longer when the caller asks (a function with more time left than that). */
export function leaseFor(storeLeaseMs: number, options: ClaimOptions): number {
  return Math.max(storeLeaseMs, options.leaseMs ?? 0);
}

/** A record's expiry (epoch seconds) a full TTL from `nowMs`. */
export function expiryFrom(nowMs: number, ttlSeconds: number): number {
  return Math.ceil(nowMs / 1000) + ttlSeconds;
}

/** Refuses, before anything is written, a response over the store's limit: body plus header names and values. */
export function assertStorable(response: StoredResponse, maxBytes: number): void {
  const bytes =
    Buffer.byteLength(response.body) +
    Object.entries(response.headers).reduce(
      (sum, [name, value]) => sum + Buffer.byteLength(name) + Buffer.byteLength(value),
      0,
    );
  if (bytes > maxBytes) throw new ResponseTooLargeError(bytes, maxBytes);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
