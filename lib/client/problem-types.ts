/**
 * The payments API's problem `type`s (RFC 9457), to switch on. They name problems; they are not pages to fetch.
 * The client can't import the server's own list (it runs in browsers); a test holds the two together.
 */
const BASE = 'https://keystone-idempotency.dev/problems/';

export const ProblemType = {
  invalidBody: `${BASE}invalid-body`,
  idempotencyKeyMissing: `${BASE}idempotency-key-missing`,
  idempotencyKeyInvalid: `${BASE}idempotency-key-invalid`,
  /** The original request with this key is still running: retry after `Retry-After`. */
  requestInFlight: `${BASE}request-in-flight`,
  /** The key was used with a different body: a client bug, never retried. */
  idempotencyKeyReused: `${BASE}idempotency-key-reused`,
  cardDeclined: `${BASE}card-declined`,
  /** The processor failed or timed out; the key was released: retry with the same key. */
  processorUnavailable: `${BASE}processor-unavailable`,
} as const;
export type ProblemType = (typeof ProblemType)[keyof typeof ProblemType];
