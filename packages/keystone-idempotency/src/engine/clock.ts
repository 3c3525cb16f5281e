import { randomUUID } from 'node:crypto';

/** Time, injected: the engine never reads the system clock directly, so tests can move it. */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * How far a lease reaches past the end of the invocation that holds it: the clock skew the takeover rule tolerates.
 * A duplicate takes over once the lease has run out by its own clock; the owner's function is stopped by then by its
 * platform's clock. Lambda hosts keep time with the Amazon Time Sync Service (typically within a millisecond), so a
 * second leaves room for clocks far worse than that. Where clocks may drift further apart, configure a store lease
 * longer than every function's timeout (the timing check does so for the reference service).
 */
export const LEASE_MARGIN_MS = 1000;

/** Fresh identifiers, injected for the same reason. */
export interface IdSource {
  /** Names one owner's hold on a record; also the commit's ClientRequestToken, so at most 36 characters. */
  leaseToken(): string;
  /** The key forwarded to outside systems for one generation of a record. */
  downstreamKey(): string;
}

/** @internal the package's own stores and adapters use it; not exported by the package */
export const randomIds: IdSource = {
  leaseToken: () => randomUUID(),
  downstreamKey: () => `idk_${randomUUID().replaceAll('-', '')}`,
};
