import * as z from 'zod/mini';

/**
 * The payment as the API answers it, and the fields it shares with the request: this file imports nothing but zod,
 * so the browser client (lib/payments/client) checks answers with the very schema the handlers answer by. The
 * request's own rules (schema.ts) add what only the server needs.
 */

/**
 * Largest single payment, in minor units: 999,999.99 in a two-decimal currency. It is the processor's own limit
 * (Stripe's, and the sandbox's): a larger amount passed our validation and was refused by the processor, which
 * surfaced as a 500 for what is the client's input.
 */
export const MAX_AMOUNT = 99_999_999;

/** ISO 4217 codes as the runtime's ICU knows them, lower-cased as they travel in the API (Stripe's convention). */
const CURRENCIES = Intl.supportedValuesOf('currency').map((code) => code.toLowerCase()) as [string, ...string[]];

/** An amount in minor units. */
export const Amount = z
  .number({ error: 'amount must be a number' })
  .check(
    z.int('amount must be an integer number of minor units (cents)'),
    z.positive('amount must be positive'),
    z.maximum(MAX_AMOUNT, `amount must be at most ${MAX_AMOUNT}`),
  );

// An enum rather than a pattern and a lookup: the OpenAPI document then states the very list the check accepts.
export const Currency = z.enum(CURRENCIES, {
  error: (issue) =>
    typeof issue.input === 'string'
      ? 'currency must be a lower-case ISO 4217 code such as usd'
      : 'currency must be a string',
});

/** The payment source's length rules (the request adds what characters it may hold). */
export const sourceLength = [
  z.minLength(1, 'source is required'),
  z.maxLength(255, 'source must be at most 255 characters'),
] as const;

/** Most characters a description may hold. */
export const DESCRIPTION_MAX_LENGTH = 1000;

/**
 * The request's fields, as a client builds them. The server's `PaymentRequest` (schema.ts) is this shape with the rule
 * on which characters its text may hold added; only the type is used here, so the browser needs none of that.
 */
const PaymentRequestFields = z.strictObject({
  amount: Amount,
  currency: Currency,
  source: z.string().check(...sourceLength),
  description: z.optional(z.string().check(z.maxLength(DESCRIPTION_MAX_LENGTH))),
});
export type PaymentRequest = z.infer<typeof PaymentRequestFields>;

/**
 * A payment as the API answers it (the 201 of POST /payments, and GET /payments/{id}). The handlers' `Payment`
 * type is inferred from this schema and the OpenAPI document is generated from it, so what is sent and what is
 * documented are one definition. Strict: a field added to the row must be added here before it can be sent.
 */
export const Payment = z.strictObject({
  id: z.string().check(z.regex(/^pay_[0-9a-f]{24}$/)),
  amount: Amount,
  currency: Currency,
  source: z.string().check(...sourceLength),
  description: z.nullable(z.string()),
  /** `succeeded` once charged; `settled` once the processor's webhook for the charge has been processed. */
  status: z.enum(['succeeded', 'settled']),
  charge_id: z.string().check(z.minLength(1)),
  created_at: z.iso.datetime(),
  settled_at: z.nullable(z.iso.datetime()),
});
export type Payment = z.infer<typeof Payment>;
