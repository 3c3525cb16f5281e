import { randomUUID } from 'node:crypto';

/** Time, injected: the engine never reads the system clock directly, so tests can move it. */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

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
