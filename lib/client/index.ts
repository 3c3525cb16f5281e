/**
 * The payments API's retry-safe client, for browsers and Node >= 20. It imports nothing from the server side and no
 * Node built-in: the demo page bundles it for the browser as it is.
 */
export type { Fetch } from './attempt-log.js';
export { checkIdempotencyKey, newIdempotencyKey } from './key.js';
export {
  PaymentOperation,
  PaymentsClient,
  type PaymentsClientOptions,
  type SendOptions,
} from './payments-client.js';
export { ProblemType } from './problem-types.js';
export {
  type Attempt,
  AttemptError,
  InvalidResponse,
  type NewPayment,
  type Payment,
  type PaymentResult,
  type Problem,
} from './result.js';
export { DEFAULT_RETRY_POLICY, RETRY_STATUSES, type RetryPolicy } from './retry-policy.js';
