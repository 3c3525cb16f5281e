import { isProblemOf, ProblemType, problemType } from '../http/problem-types.js';

/**
 * The problem `type`s (RFC 9457) that an API built on this library's HTTP adapter (`keystone-idempotency/http`)
 * answers about the key itself, as the full URIs a response carries under the adapter's default base
 * (`https://keystone-idempotency.dev/problems/`): taken from the adapter's one list of problem types (plain data, so
 * the browser bundle takes only that file). They name problems; they are not pages to fetch. A service that sets
 * its own base (`problemErrorHandler({ problemTypeBase })`) answers the same slugs under it: match those with
 * {@link idempotencyProblemOf}, which the client's default in-flight rule does.
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

const SLUGS = {
  requestInFlight: ProblemType.requestInFlight,
  idempotencyKeyReused: ProblemType.idempotencyKeyReused,
  idempotencyKeyMissing: ProblemType.idempotencyKeyMissing,
  idempotencyKeyInvalid: ProblemType.idempotencyKeyInvalid,
} as const satisfies Record<keyof typeof IdempotencyProblemType, string>;

/**
 * Which of the key's problems a response's `type` names, under whatever base the server answers with (the slug is
 * what stays the same): `idempotencyProblemOf('https://api.example.com/problems/request-in-flight')` is
 * `'requestInFlight'`. Undefined for any other problem.
 */
export function idempotencyProblemOf(type: string): keyof typeof IdempotencyProblemType | undefined {
  return (Object.keys(SLUGS) as (keyof typeof SLUGS)[]).find((name) => isProblemOf(type, SLUGS[name]));
}
