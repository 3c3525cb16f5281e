import { PROBLEM_TYPE_BASE, PaymentProblemType as Slug } from '../problem-types';

const uri = <TSlug extends string>(slug: TSlug): `${typeof PROBLEM_TYPE_BASE}${TSlug}` => `${PROBLEM_TYPE_BASE}${slug}`;

/**
 * The payments API's own problem `type`s (RFC 9457) that its clients get, as the full URIs a response carries, to
 * switch on: from the service's one list (lib/payments/problem-types.ts, plain data the browser bundle can carry).
 * The webhook receiver's `invalid-signature` is the processor's to see, not a client's.
 *
 * The key's own problems (`request-in-flight`, `idempotency-key-reused`) are the library's:
 * `IdempotencyProblemType` from `keystone-idempotency/client`.
 */
export const PaymentProblemType = {
  /** The processor declined the card (402, with `decline_code`): a stored answer, replayed, never retried. */
  cardDeclined: uri(Slug.cardDeclined),
  /** The processor failed, timed out or was unreachable (502/503/504 + Retry-After): retried with the same key. */
  processorUnavailable: uri(Slug.processorUnavailable),
  /** The processor refused a value the client chose (422, `errors` naming the field): stored and replayed. */
  paymentRejected: uri(Slug.paymentRejected),
  /** No such payment for this account (404). */
  notFound: uri(Slug.notFound),
} as const;
export type PaymentProblemType = (typeof PaymentProblemType)[keyof typeof PaymentProblemType];
