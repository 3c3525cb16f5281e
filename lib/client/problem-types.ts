import { ProblemType, problemType } from '../http/problem-types.js';

/**
 * The problem `type`s (RFC 9457) that an API built on this library's HTTP adapter (`keystone-idempotency/http`)
 * answers about the key itself, as the full URIs a response carries: taken from the adapter's one list of problem
 * types (plain data, so the browser bundle takes only that file). They name problems; they are not pages to fetch.
 *
 * - `requestInFlight` (409 + `Retry-After`): the original request with this key is still running. The one 409 the
 *   client retries by default (see `RetrySafeClientOptions.isInFlight`).
 * - `idempotencyKeyReused` (422): the key was used with a different body: a client bug, never retried.
 * - `idempotencyKeyMissing`, `idempotencyKeyInvalid` (400): the client always sends a key it checked, so these mean
 *   a proxy dropped or changed the header.
 */
export const IdempotencyProblemType = {
  requestInFlight: problemType(ProblemType.requestInFlight),
  idempotencyKeyReused: problemType(ProblemType.idempotencyKeyReused),
  idempotencyKeyMissing: problemType(ProblemType.idempotencyKeyMissing),
  idempotencyKeyInvalid: problemType(ProblemType.idempotencyKeyInvalid),
} as const;
export type IdempotencyProblemType = (typeof IdempotencyProblemType)[keyof typeof IdempotencyProblemType];
