/**
 * The problem `type`s (RFC 9457) the HTTP adapter answers with itself, in one list: the request, the key, the claim,
 * the caller's account and an unexpected failure. A service's own problems (a declined card, say) are the service's
 * to list; it answers them under the same base, or another.
 *
 * A `type` is a slug under a base URI: `https://keystone-idempotency.dev/problems/request-in-flight` unless the
 * service sets its own base (`problemErrorHandler({ problemTypeBase })`). It names the problem; it is not a page to
 * fetch. Clients switch on the slug, which is the same under any base ({@link adapterProblemOf}).
 *
 * Plain data with no imports: the browser client (src/client) takes its list from this one.
 */

/** The base the adapter's problem types are under unless the service sets its own. */
export const DEFAULT_PROBLEM_TYPE_BASE = 'https://keystone-idempotency.dev/problems/';

/** The adapter's problem types, by slug. */
export const ProblemType = {
  /** The body is not JSON, not UTF-8, or breaks the schema (400, `errors` listing every problem). */
  invalidBody: 'invalid-body',
  /** A body in a charset other than UTF-8 (415): JSON is UTF-8 (RFC 8259), and guessing would change what was sent. */
  unsupportedMediaType: 'unsupported-media-type',
  /** No Idempotency-Key where the route needs one (400). */
  idempotencyKeyMissing: 'idempotency-key-missing',
  /** An Idempotency-Key that is empty, too long or not a valid header value (400). */
  idempotencyKeyInvalid: 'idempotency-key-invalid',
  /** The original request with this key is still running (409): retry after `Retry-After`. */
  requestInFlight: 'request-in-flight',
  /** The key was used with a different body (422): a client bug, never retried. */
  idempotencyKeyReused: 'idempotency-key-reused',
  /** The request carries no authenticated account (401), so its key can't be scoped to one. */
  unauthenticated: 'unauthenticated',
  /**
   * Anything else that went wrong (5xx): the body says nothing of the cause. A response too large to store is one
   * (a configuration problem, not the client's).
   */
  internal: 'internal-error',
} as const;
export type ProblemSlug = (typeof ProblemType)[keyof typeof ProblemType];

/** The full `type` URI of a slug, under `base` (by default {@link DEFAULT_PROBLEM_TYPE_BASE}). */
export function problemType<TSlug extends string, TBase extends string = typeof DEFAULT_PROBLEM_TYPE_BASE>(
  slug: TSlug,
  base: TBase = DEFAULT_PROBLEM_TYPE_BASE as TBase,
): `${TBase}${TSlug}` {
  return `${base}${slug}`;
}

/**
 * Whether `type` names the problem `slug` under any base: it is the slug itself, or ends in it after a `/`, `:` or
 * `#` (`https://api.example.com/problems/request-in-flight`, `urn:example:problem:request-in-flight`).
 */
export function isProblemOf(type: string, slug: string): boolean {
  if (type === slug) return true;
  return type.endsWith(slug) && '/:#'.includes(type.charAt(type.length - slug.length - 1));
}

/** Which of the adapter's problems `type` names, under whatever base the service answers with; undefined for none. */
export function adapterProblemOf(type: string): ProblemSlug | undefined {
  return Object.values(ProblemType).find((slug) => isProblemOf(type, slug));
}
