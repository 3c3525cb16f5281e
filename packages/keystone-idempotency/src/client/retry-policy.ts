/**
 * When the client sends an operation again, and how long it waits first. Pure: no clock, no randomness of its own.
 *
 * What is retried is what an idempotent endpoint answers for "not done yet, safe to repeat with the same key": a
 * duplicate still in flight (409, when the server says so: `RetrySafeClientOptions.isInFlight`), throttling (429),
 * and a dependency failing or timing out (502, 503, 504: a server that releases the key on such a failure lets the
 * retry reach the dependency again under the same key, and find any effect it already made). Network errors and
 * attempt timeouts are retried too: the outcome is unknown, and only the same key can safely find it out.
 * Everything else is final for this key: 400 and 422 need a different request, 401 other credentials, a stored
 * refusal (402, say) would be replayed by every retry, and a 404 will not appear by waiting.
 */

/** The statuses the client sends again, with the same key. */
export const RETRY_STATUSES = [409, 429, 502, 503, 504] as const;
export type RetryStatus = (typeof RETRY_STATUSES)[number];

export interface RetryPolicy {
  /** Attempts in all, the first one included. */
  readonly maxAttempts: number;
  /** The backoff ceiling before the first retry; it doubles for each retry after that. */
  readonly baseDelayMs: number;
  /** The backoff ceiling never grows past this. A server's `Retry-After` is honoured beyond it. */
  readonly maxDelayMs: number;
  /** One attempt's budget: past it the attempt counts as a timeout, and is retried. */
  readonly attemptTimeoutMs: number;
  /** The whole operation's budget, waits included: past it the client stops, wherever it is. */
  readonly deadlineMs: number;
}

/**
 * Defaults for an API that answers within seconds: an attempt gets 15 s before it counts as lost (the reference
 * payments API's integrations time out at 10 s); a duplicate of a running request is told to come back in about a
 * second, a few times over.
 */
export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  maxAttempts: 5,
  baseDelayMs: 250,
  maxDelayMs: 8_000,
  attemptTimeoutMs: 15_000,
  deadlineMs: 60_000,
};

export function isRetryStatus(status: number): status is RetryStatus {
  return (RETRY_STATUSES as readonly number[]).includes(status);
}

/**
 * The most the client may wait before retry number `retry` (1 for the first retry): exponential, capped.
 *
 * @example
 * backoffCeilingMs(1, DEFAULT_RETRY_POLICY); // 250
 * backoffCeilingMs(3, DEFAULT_RETRY_POLICY); // 1000
 */
export function backoffCeilingMs(retry: number, policy: Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs'>): number {
  return Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, retry - 1));
}

/**
 * "Full jitter" (AWS Architecture Blog, "Exponential Backoff And Jitter"): a uniformly random wait between 0 and
 * the ceiling. Clients that failed together then retry apart, instead of arriving again as one burst.
 *
 * @param random a value in [0, 1), like `Math.random()`
 */
export function fullJitter(ceilingMs: number, random: () => number): number {
  return random() * ceilingMs;
}

/**
 * How long a usable `Retry-After` (delay-seconds or an HTTP-date, see `usableRetryAfter`) asks to wait from `now`,
 * in milliseconds; a date already past asks for no wait. Read here rather than by the retry loop: ky takes a number
 * of seconds that reaches past 2024-01-01 when read as epoch seconds for a timestamp, and `1750000000` (about 55
 * years) became a retry a few milliseconds later.
 *
 * @example
 * retryAfterMs('2', now); // 2000
 * retryAfterMs(new Date(now + 3000).toUTCString(), now); // about 3000 (an HTTP-date has whole seconds)
 */
export function retryAfterMs(retryAfter: string, now: number): number {
  const trimmed = retryAfter.trim();
  const ms = /^\d+$/.test(trimmed) ? Number(trimmed) * 1000 : Date.parse(trimmed) - now;
  return Math.max(0, ms);
}

/** The longest delay a timer takes (2^31 - 1 ms, about 24.8 days); a longer one fires at once. */
const MAX_TIMER_MS = 2_147_483_647;

/** Refuses a policy that could not work, at construction rather than at the first retry. */
export function checkRetryPolicy(policy: RetryPolicy): RetryPolicy {
  const inRange = (name: keyof RetryPolicy, min: number) => {
    const value = policy[name];
    if (!Number.isFinite(value) || value < min || value > MAX_TIMER_MS) {
      throw new RangeError(`retry.${name} must be a number from ${min} to ${MAX_TIMER_MS}`);
    }
  };
  inRange('maxAttempts', 1);
  if (!Number.isInteger(policy.maxAttempts)) throw new RangeError('retry.maxAttempts must be an integer');
  inRange('baseDelayMs', 0);
  inRange('maxDelayMs', 0);
  inRange('attemptTimeoutMs', 1);
  inRange('deadlineMs', 1);
  return policy;
}
