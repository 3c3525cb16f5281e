/**
 * The payments API's retry-safe client, for browsers and Node >= 20. It imports nothing from the server side and no
 * Node built-in: the demo page bundles it for the browser as it is.
 */
export type { Fetch } from './attempt-log';
export { checkIdempotencyKey, newIdempotencyKey } from './key';
export {
  PaymentOperation,
  PaymentsClient,
  type PaymentsClientOptions,
  type SendOptions,
} from './payments-client';
export { ProblemType } from './problem-types';
export { type Attempt, AttemptError, type NewPayment, type Payment, type PaymentResult, type Problem } from './result';
export { DEFAULT_RETRY_POLICY, RETRY_STATUSES, type RetryPolicy } from './retry-policy';
