import { z } from 'zod';

/** Largest single payment, in minor units: 1,000,000.00 in a two-decimal currency. */
export const MAX_AMOUNT = 100_000_000;

/** ISO 4217 codes as the runtime's ICU knows them, lower-cased as they travel in the API (Stripe's convention). */
const CURRENCIES = new Set(Intl.supportedValuesOf('currency').map((code) => code.toLowerCase()));

/** POST /payments body. Unknown fields are an error, not silently dropped: a typo must not become a payment. */
export const PaymentRequest = z.strictObject({
  amount: z
    .number({ error: 'amount must be a number' })
    .int('amount must be an integer number of minor units (cents)')
    .positive('amount must be positive')
    .max(MAX_AMOUNT, `amount must be at most ${MAX_AMOUNT}`),
  currency: z
    .string({ error: 'currency must be a string' })
    // One check, one message: a client gets a single clear error per field.
    .refine(
      (code) => /^[a-z]{3}$/.test(code) && CURRENCIES.has(code),
      'currency must be a lower-case ISO 4217 code such as usd',
    ),
  source: z.string({ error: 'source must be a string' }).min(1, 'source is required').max(255),
  description: z.string({ error: 'description must be a string' }).max(1000).optional(),
});
export type PaymentRequest = z.infer<typeof PaymentRequest>;
