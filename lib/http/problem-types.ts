/**
 * Every problem `type` (RFC 9457) this project answers with, in one list: the HTTP adapter's own and the reference
 * payments service's. A `type` is a stable identifier clients switch on (documented in the README and the OpenAPI
 * document); it names the problem, it is not a page to fetch.
 *
 * Plain data with no imports: the browser client (lib/client) builds its list of full `type` URIs from this one.
 */
export const PROBLEM_TYPE_BASE = 'https://keystone-idempotency.dev/problems/';

/** The problem types, by slug. */
export const ProblemType = {
  // The HTTP adapter's (lib/http): the request, the key, the claim.
  badRequest: 'bad-request',
  invalidBody: 'invalid-body',
  /** A body in a charset other than UTF-8: JSON is UTF-8 (RFC 8259), and guessing would change what was sent. */
  unsupportedMediaType: 'unsupported-media-type',
  idempotencyKeyMissing: 'idempotency-key-missing',
  idempotencyKeyInvalid: 'idempotency-key-invalid',
  /** The original request with this key is still running: retry after `Retry-After`. */
  requestInFlight: 'request-in-flight',
  /** The key was used with a different body: a client bug, never retried. */
  idempotencyKeyReused: 'idempotency-key-reused',
  unauthenticated: 'unauthenticated',
  notFound: 'not-found',
  internal: 'internal-error',
  // The payments service's (lib/payments).
  /** The processor declined the card: a stored, replayed answer (402) with the processor's `decline_code`. */
  cardDeclined: 'card-declined',
  /** The processor failed, timed out or was unreachable (502/503/504 + Retry-After): retry with the same key. */
  processorUnavailable: 'processor-unavailable',
  /** The processor refused a value the client chose (422, `errors` naming the field): stored and replayed. */
  paymentRejected: 'payment-rejected',
  // The webhook receiver's (lib/webhooks).
  /** A webhook's signature is missing, forged or stale (401): nothing was stored. */
  invalidSignature: 'invalid-signature',
} as const;
export type ProblemSlug = (typeof ProblemType)[keyof typeof ProblemType];

/** The full `type` URI of a slug. */
export function problemType<TSlug extends string>(slug: TSlug): `${typeof PROBLEM_TYPE_BASE}${TSlug}` {
  return `${PROBLEM_TYPE_BASE}${slug}`;
}
