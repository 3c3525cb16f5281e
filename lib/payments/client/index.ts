/**
 * The payments API's client, built on the library's retry-safe client (`keystone-idempotency/client`): for
 * browsers (the double-tap demo page bundles it) and Node >= 20. Part of the reference service, not of the package.
 */
export {
  type NewPayment,
  type Payment,
  type PaymentOperation,
  type PaymentResult,
  PaymentsClient,
  type PaymentsClientOptions,
  readPayment,
} from './payments-client';
export { PaymentProblemType } from './problem-types';
