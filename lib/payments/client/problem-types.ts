/**
 * The payments API's own problem `type`s (RFC 9457), as the full URIs a response carries, to switch on. The
 * server's list (`PaymentProblemType` in lib/payments/problems.ts) comes with the HTTP adapter and zod, which a
 * browser bundle must not carry: the URIs are written out here, and a test holds them equal to the server's.
 *
 * The key's own problems (`request-in-flight`, `idempotency-key-reused`) are the library's:
 * `IdempotencyProblemType` from `keystone-idempotency/client`.
 */
export const PaymentProblemType = {
  /** The processor declined the card (402, with `decline_code`): a stored answer, replayed, never retried. */
  cardDeclined: 'https://keystone-idempotency.dev/problems/card-declined',
  /** The processor failed, timed out or was unreachable (502/503/504 + Retry-After): retried with the same key. */
  processorUnavailable: 'https://keystone-idempotency.dev/problems/processor-unavailable',
  /** The processor refused a value the client chose (422, `errors` naming the field): stored and replayed. */
  paymentRejected: 'https://keystone-idempotency.dev/problems/payment-rejected',
} as const;
export type PaymentProblemType = (typeof PaymentProblemType)[keyof typeof PaymentProblemType];
