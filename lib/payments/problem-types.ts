/**
 * The payments service's problem types (RFC 9457), in one list: plain data with no imports, so that the functions,
 * the OpenAPI document and the browser client (lib/payments/client) all take them from here.
 */

/**
 * The base URI of every problem `type` this service answers: its own ({@link PaymentProblemType}) and the HTTP
 * adapter's (`ProblemType` of `keystone-idempotency/http`), which each function sets on `problemErrorHandler`. The
 * adapter's default, kept so that the types clients already switch on stay what they were.
 */
export const PROBLEM_TYPE_BASE = 'https://keystone-idempotency.dev/problems/';

/**
 * The payments service's own problem types, by slug, in one list (the HTTP adapter's are its `ProblemType`): the
 * payments API's and the webhook receiver's. Answered under {@link PROBLEM_TYPE_BASE}.
 */
export const PaymentProblemType = {
  /** The processor declined the card: a stored, replayed answer (402) with the processor's `decline_code`. */
  cardDeclined: 'card-declined',
  /** The processor failed, timed out or was unreachable (502/503/504 + Retry-After): retry with the same key. */
  processorUnavailable: 'processor-unavailable',
  /**
   * The processor refused a value the client chose (an unknown card token, say): the client's mistake, told as such
   * (422, `errors` naming the field), stored and replayed like any other deterministic answer.
   */
  paymentRejected: 'payment-rejected',
  /**
   * No such payment or order for this account, or no such SKU (404); another account's payment or order is
   * indistinguishable from none.
   */
  notFound: 'not-found',
  /**
   * The stock cannot cover an order (409, `shortages` naming each line): stored and replayed like a decline, so a retry
   * of the same key answers the same; a new order (a new key) may find stock again.
   */
  insufficientStock: 'insufficient-stock',
  /**
   * Other orders took and gave back the stock while an order reserved it (503 + Retry-After): nothing was reserved or
   * charged, and the key is free; retry with the same key.
   */
  stockContended: 'stock-contended',
  /** The warehouse did not answer a booking, or its lookup (502/503/504 + Retry-After): retry with the same key. */
  warehouseUnavailable: 'warehouse-unavailable',
  /**
   * The warehouse refused to ship the order for good (422): its charge was refunded and its stock given back before
   * this answer was stored; a retry of the same key replays it.
   */
  shipmentRefused: 'shipment-refused',
  /** The mailer did not answer (502/503/504 + Retry-After): retry with the same key; the order is kept as far as it got. */
  mailerUnavailable: 'mailer-unavailable',
  /** A webhook's signature is missing, forged or stale (401): nothing was stored. */
  invalidSignature: 'invalid-signature',
} as const;
export type PaymentProblemSlug = (typeof PaymentProblemType)[keyof typeof PaymentProblemType];
