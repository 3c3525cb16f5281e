import type { Clock } from './clock.js';
import {
  type ClaimOptions,
  type ClaimOutcome,
  MAX_CLAIM_ROUNDS,
  type ResumeOptions,
  type ResumeOutcome,
} from './contract.js';
import { decide, isExpired } from './decide.js';
import { ContendedError, ResponseTooLargeError } from './errors.js';
import type { IdempotencyRecord, Lease, StoredResponse } from './record.js';

/**
 * How a record changes owner, the same on every store: the rounds of a claim and of recovery's resume, driven by the
 * two conditional writes each store makes in its own terms (a fresh claim of an absent or expired key; a takeover of a
 * released, abandoned or run-out record, conditioned on the lease token it saw) and by its read. The decision between
 * rounds is the engine's pure `decide`, so both stores answer every race alike; only the writes differ.
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
  | { readonly kind: 'record'; readonly record: IdempotencyRecord | undefined };

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
  const waitMs = options.waitMs ?? 0;
  const claim = { recoverable: options.recoverable ?? false, leaseMs: leaseFor(store.leaseMs, options) };
  let waited = 0;
  let pollMs = POLL_START_MS;
  let writes = 1;
  let seen = await store.putFresh(key, fingerprint, claim);
  for (;;) {
    if (seen.kind === 'acquired') return { kind: 'acquired', lease: seen.lease };
    const now = store.clock.now();
    const decision = decide(seen.record, fingerprint, now);
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

/**
 * The rounds of recovery's resume: take over an unfinished operation by its key, never creating a record and never
 * disturbing a live owner. Recovery's own lease is recoverable: if recovery dies half-way, the operation stays due.
 */
export async function resumeRounds(
  store: OwnershipWrites,
  key: string,
  options: ResumeOptions,
): Promise<ResumeOutcome> {
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
        record = seen.record && !isExpired(seen.record, store.clock.now()) ? seen.record : undefined;
      }
    }
  }
  throw new ContendedError(key);
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
