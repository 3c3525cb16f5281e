import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { IdempotencyStore } from '../../engine/contract.js';
import { LeaseLostError } from '../../engine/errors.js';
import { scopedKey } from '../../engine/key.js';
import type { IdempotencyRecord, Lease, StoredResponse } from '../../engine/record.js';
import type { TestFramework } from '../framework.js';
import { ManualClock } from '../manual-clock.js';
import type { LostReplyStep, StoreContractHarness } from './harness.js';

/** The lease every case's store holds, in seconds: the cases move the clock past it (30_001 ms) or not. */
export const LEASE_SECONDS = 30;
export const LEASE_MS = LEASE_SECONDS * 1000;

export const created: StoredResponse = {
  statusCode: 201,
  body: '{"id":"pay_1"}',
  headers: { 'Content-Type': 'application/json' },
};

/**
 * Text a store must not alter: a NUL, lone surrogates (high, low, between characters) and a well-formed pair. Step
 * results and response headers come back exactly; a response body comes back as the same UTF-8 bytes, which is what
 * an HTTP response of it carries (a lone surrogate is no character: every encoder writes U+FFFD for it).
 */
export const ODD_TEXT: readonly string[] = ['\u0000', '\ud800', '\udfff', 'a\ud800b', '\ud83d\ude00'];

export const newKey = (account = 'acct_1') =>
  scopedKey({ accountId: account, operation: 'POST /payments', key: randomUUID() });

/** Claims a key that the case expects to be free (or takeable): the lease, or a failed case. */
export async function acquire(s: IdempotencyStore<unknown>, key: string, fp = 'fp'): Promise<Lease> {
  const outcome = await s.claim(key, fp);
  if (outcome.kind !== 'acquired') assert.fail(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

/** Claims `key` for work whose effect lives elsewhere: tracked in the recovery set. */
export async function acquireRecoverable(s: IdempotencyStore<unknown>, key: string): Promise<Lease> {
  const outcome = await s.claim(key, 'fp', { recoverable: true });
  if (outcome.kind !== 'acquired') assert.fail(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

/** Whether a commit landed: true, or false for a `LeaseLostError` (fenced out); any other error is thrown. */
export async function landed(commit: Promise<void>): Promise<boolean> {
  try {
    await commit;
    return true;
  } catch (error) {
    if (error instanceof LeaseLostError) return false;
    throw error;
  }
}

/** A count of round trips to the database, as the harness keeps it. */
export type RoundTrips = { reset(): void; readonly count: number };

/**
 * What each block of the contract suite registers its cases with: the harness, the framework, stores with the
 * suite's lease, and the kinds of case that run only where the harness supports them.
 */
export interface Contract<TEffect> {
  readonly h: StoreContractHarness<TEffect>;
  readonly describe: TestFramework['describe'];
  readonly it: TestFramework['it'];
  /** A store over the database under test, holding the suite's lease, on `clock`. */
  store(clock?: ManualClock, settings?: { ttlSeconds?: number }): IdempotencyStore<TEffect>;
  /** The record as the database holds it (the harness's raw read), or through `via.get` without one. */
  stored(key: string, via: IdempotencyStore<TEffect>): Promise<IdempotencyRecord | undefined>;
  /** A case that counts round trips, registered only when the harness counts them. */
  countingIt(name: string, test: (counter: RoundTrips) => Promise<void>): void;
  /** A case that loses replies, registered only when the harness can lose them. */
  faultIt(name: string, test: () => Promise<void>): void;
  /** A store whose replies can be lost (only inside a `faultIt` case). */
  faultyStore(settings?: { clock?: ManualClock; attempts?: number }): IdempotencyStore<TEffect>;
  /** Arms lost replies (only inside a `faultIt` case). */
  loseReplies(step: LostReplyStep, key: string, times?: number): { fired(): number };
}

export function contractOf<TEffect>(h: StoreContractHarness<TEffect>, framework: TestFramework): Contract<TEffect> {
  const { describe, it } = framework;
  const rounds = h.roundTrips;
  const faults = h.faults;
  return {
    h,
    describe,
    it,
    store: (clock = new ManualClock(), settings = {}) => h.store({ clock, leaseSeconds: LEASE_SECONDS, ...settings }),
    stored: (key, via) => (h.stored ? h.stored(key) : via.get(key)),
    countingIt: (name, test) => {
      if (rounds) it(name, () => test(rounds));
    },
    faultIt: (name, test) => {
      if (faults) it(name, test);
    },
    faultyStore: (settings = {}) => {
      if (!faults) throw new Error('unreachable: cases of lost replies are registered only with faults');
      const { clock = new ManualClock(), attempts } = settings;
      return faults.store({ clock, leaseSeconds: LEASE_SECONDS, ...(attempts ? { attempts } : {}) });
    },
    loseReplies: (step, key, times) => {
      if (!faults) throw new Error('unreachable: cases of lost replies are registered only with faults');
      return faults.loseReplies(step, key, times);
    },
  };
}
