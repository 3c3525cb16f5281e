import { setTimeout as sleep } from 'node:timers/promises';
import { ErrorType } from './errors';
import type { Fault } from './faults';

/** A response as an endpoint answers it (and, if idempotent, remembers it under a key: replays send it again). */
export interface StoredResponse {
  readonly status: number;
  readonly body: unknown;
}

/** One attempt at an endpoint's work, with the fault it drew applied. */
export interface Attempt {
  readonly response: StoredResponse;
  /** False when nothing was done (an injected 503): an idempotent endpoint must let a retry with the key work. */
  readonly remember: boolean;
  /** Destroy the socket instead of answering (the `drop_after_charge` fault). */
  readonly hangUp: boolean;
}

/** Does the work under the fault drawn for it: the one place every fault mode means what it says. */
export async function attempt(
  fault: Fault | undefined,
  perform: () => StoredResponse,
  signal: AbortSignal,
): Promise<Attempt> {
  // A waiter inheriting a key released by a close-cancelled delay must not charge on a sandbox that has closed.
  signal.throwIfAborted();
  if (fault?.mode === 'error_503') {
    // Nothing was done, so nothing is remembered: a retry with the same key must be free to do the work.
    return { response: serviceUnavailable(), remember: false, hangUp: false };
  }
  if (fault?.mode === 'refuse') {
    // Refused before anything was done: not remembered either, as a processor keeps no answer to a request it refused.
    return { response: refused(), remember: false, hangUp: false };
  }
  if (fault?.mode === 'delay') await sleep(fault.ms, undefined, { signal });
  const response = perform();
  if (fault?.mode === 'delay_after_charge') await sleep(fault.ms, undefined, { signal }).catch(() => undefined);
  return { response, remember: true, hangUp: fault?.mode === 'drop_after_charge' };
}

function serviceUnavailable(): StoredResponse {
  return {
    status: 503,
    body: { error: { type: ErrorType.api, message: 'The sandbox is unavailable (injected fault). Retry later.' } },
  };
}

function refused(): StoredResponse {
  return {
    status: 400,
    body: {
      error: {
        type: ErrorType.invalidRequest,
        code: 'refused',
        message: 'The request was refused (injected fault): sending it again will not change that.',
      },
    },
  };
}
