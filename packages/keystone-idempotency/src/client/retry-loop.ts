import { isHTTPError, type RetryOptions } from 'ky';
import { backoffCeilingMs, fullJitter, type RetryPolicy, retryAfterMs } from './retry-policy.js';

export interface RetryLoopSettings {
  readonly policy: RetryPolicy;
  /** The HTTP method, lower-case: ky retries only the methods it is told to, and the key makes this one safe. */
  readonly method: string;
  /** Whether an HTTP answer (never a 2xx) is "not done yet, safe to send again with the same key". */
  readonly retryable: (response: Response) => boolean | Promise<boolean>;
  /** Epoch milliseconds when the operation's deadline passes. */
  readonly deadlineAt: number;
  /** Aborted once the deadline passes or the caller aborts: nothing is retried after that. */
  readonly stopped: AbortSignal;
  readonly now: () => number;
  readonly random: () => number;
}

export interface RetryLoop {
  /** ky's `retry` option. */
  readonly options: RetryOptions;
  /**
   * Set when the loop stopped because the server asked for a wait that ends at or after the deadline: epoch
   * milliseconds, when the server said to come back.
   */
  readonly retryAt: number | undefined;
}

/**
 * ky's retry loop, with every decision taken here: whether to retry (`shouldRetry` answers true or false, never
 * "ky's default"), and how long to wait. ky still counts attempts, waits (cut short by the deadline or the caller's
 * signal) and sends again; the attempt log times each attempt out.
 *
 * The server's `Retry-After` is read here, not by ky: ky takes delay-seconds that would pass 2024-01-01 as epoch
 * seconds for a timestamp (`Retry-After: 1750000000`, valid and about 55 years, was retried a few milliseconds
 * later), and reads rate-limit headers this client does not follow. A wait that ends before the deadline is waited
 * exactly, without jitter; one that doesn't stops the loop at once, with `retryAt` set, rather than spending the
 * deadline waiting for a retry that could never be sent in time, or sending it early.
 */
export function retryLoop(settings: RetryLoopSettings): RetryLoop {
  const { policy, now, random } = settings;
  /** The next wait: the server's, exactly, or (undefined) the client's own backoff with full jitter. */
  let serverWaitMs: number | undefined;
  let retryAt: number | undefined;

  async function shouldRetry({ error }: { error: Error }): Promise<boolean> {
    if (settings.stopped.aborted) return false;
    serverWaitMs = undefined;
    // A network error or an attempt timeout: the outcome is unknown, and only the same key can safely find it out.
    if (!isHTTPError(error)) return true;
    if (!(await settings.retryable(error.response))) return false;
    // Only a usable Retry-After reaches here (the attempt log drops the rest): without one, back off.
    const retryAfter = error.response.headers.get('retry-after');
    if (retryAfter === null) return true;
    const at = now();
    const waitMs = retryAfterMs(retryAfter, at);
    if (at + waitMs >= settings.deadlineAt) {
      retryAt = at + waitMs;
      return false;
    }
    serverWaitMs = waitMs;
    return true;
  }

  return {
    options: {
      limit: policy.maxAttempts - 1,
      methods: [settings.method],
      shouldRetry,
      // The ceiling is capped here, before the jitter: full jitter draws from [0, min(cap, base * 2^n)).
      delay: (retry) => serverWaitMs ?? backoffCeilingMs(retry, policy),
      jitter: (ms) => (serverWaitMs === undefined ? fullJitter(ms, random) : ms),
    },
    get retryAt() {
      return retryAt;
    },
  };
}
