import { z } from 'zod';

/**
 * Largest single payment, in minor units: 999,999.99 in a two-decimal currency. It is the processor's own limit
 * (Stripe's, and the sandbox's): a larger amount passed our validation and was refused by the processor, which
 * surfaced as a 500 for what is the client's input.
 */
export const MAX_AMOUNT = 99_999_999;

/** ISO 4217 codes as the runtime's ICU knows them, lower-cased as they travel in the API (Stripe's convention). */
const CURRENCIES = new Set(Intl.supportedValuesOf('currency').map((code) => code.toLowerCase()));

const CURRENCY_MESSAGE = 'currency must be a lower-case ISO 4217 code such as usd';

/** POST /payments body. Unknown fields are an error, not silently dropped: a typo must not become a payment. */
export const PaymentRequest = z.strictObject({
  amount: z
    .number({ error: 'amount must be a number' })
    .int('amount must be an integer number of minor units (cents)')
    .positive('amount must be positive')
    .max(MAX_AMOUNT, `amount must be at most ${MAX_AMOUNT}`),
  currency: z
    .string({ error: 'currency must be a string' })
    // The pattern is the part a JSON Schema (the OpenAPI document, the API Gateway model) can state; the ICU lookup
    // is not. One message either way, and `abort` stops at the first: a client gets one clear error per field.
    .regex(/^[a-z]{3}$/, { error: CURRENCY_MESSAGE, abort: true })
    .refine((code) => CURRENCIES.has(code), CURRENCY_MESSAGE),
  source: z.string({ error: 'source must be a string' }).min(1, 'source is required').max(255),
  description: z.string({ error: 'description must be a string' }).max(1000).optional(),
});
export type PaymentRequest = z.infer<typeof PaymentRequest>;

/**
 * A payment as the API answers it (the 201 of POST /payments, and GET /payments/{id}). The handlers' `Payment`
 * type is inferred from this schema and the OpenAPI document is generated from it, so what is sent and what is
 * documented are one definition. Strict: a field added to the row must be added here before it can be sent.
 */
export const Payment = z.strictObject({
  id: z.string().regex(/^pay_[0-9a-f]{24}$/),
  amount: PaymentRequest.shape.amount,
  currency: PaymentRequest.shape.currency,
  source: PaymentRequest.shape.source,
  description: z.string().nullable(),
  /** `succeeded` once charged; `settled` once the processor's webhook for the charge has been processed. */
  status: z.enum(['succeeded', 'settled']),
  charge_id: z.string().min(1),
  created_at: z.iso.datetime(),
  settled_at: z.iso.datetime().nullable(),
});
export type Payment = z.infer<typeof Payment>;
