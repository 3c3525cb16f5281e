import { PaymentRequest } from '../payments/schema';
import { draft04RequestSchema, type JsonSchema } from './json-schema';

/** A request body model for API Gateway: a name and a JSON Schema draft-04, converted from a handler's schema. */
export interface RequestModel {
  readonly name: string;
  readonly description: string;
  readonly schema: JsonSchema;
}

/**
 * POST /payments' body, as API Gateway checks it before the function runs: the same zod schema the function
 * validates with, converted to draft-04. Everything in it converts except the currency's ICU lookup (a refinement),
 * which the function still applies; so the gateway turns away what the function would, and never the opposite.
 */
export const paymentRequestModel: RequestModel = {
  name: 'PaymentRequest',
  description: 'POST /payments body, generated from lib/payments/schema.ts',
  schema: draft04RequestSchema(PaymentRequest),
};
