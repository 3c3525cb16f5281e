/**
 * How the service reads an outside system's HTTP answer (the processor, the warehouse, the mailer), one rule for all:
 * no answer, a 408, 409 (a request with the key still running, a booking still being made), 429, a 5xx or a redirect
 * it could not follow says "later" (`unavailable`: the work may or may not have happened); any other 4xx refuses the
 * request for good.
 */
export type Unavailable = {
  readonly kind: 'unavailable';
  /** `timeout`: no answer in time (a 504 to our client); `overloaded`: it asked us to come back (a 503). */
  readonly reason: 'timeout' | 'network' | 'server_error' | 'overloaded';
  readonly status?: number;
  readonly retryAfterSeconds?: number;
};

/**
 * A call that got no answer: it timed out (`AbortSignal.timeout`), or the connection failed. The timeout is told by
 * its name, not `instanceof Error`: fetch rejects with a DOMException of Node's own realm, which is no `Error` of
 * another realm (a test runner's, for one).
 */
export function noAnswer(error: unknown): Unavailable {
  const name = (error as { name?: unknown } | null | undefined)?.name;
  const timedOut = name === 'TimeoutError' || name === 'AbortError';
  return { kind: 'unavailable', reason: timedOut ? 'timeout' : 'network' };
}

/** The "later" a non-2xx answer says, or `undefined` when it is a refusal (a 4xx other than 408, 409 and 429). */
export function laterOf(response: Response): Unavailable | undefined {
  const { status } = response;
  if (status === 408 || status === 409 || status === 429 || status === 503) {
    const retryAfter = Number(response.headers.get('retry-after'));
    return {
      kind: 'unavailable',
      reason: status === 408 ? 'timeout' : 'overloaded',
      status,
      ...(Number.isFinite(retryAfter) && retryAfter > 0 ? { retryAfterSeconds: retryAfter } : {}),
    };
  }
  if (status < 400 || status >= 500) return { kind: 'unavailable', reason: 'server_error', status };
  return undefined;
}

/** The fields of an error body in Stripe's envelope (`{ error: { type, code, message, param } }`), if it is one. */
export function errorFields(body: unknown): {
  readonly type?: string;
  readonly code?: string;
  readonly message?: string;
  readonly param?: string;
} {
  const error = (body as { error?: unknown } | null | undefined)?.error;
  return typeof error === 'object' && error !== null ? (error as Record<string, string | undefined>) : {};
}
