import { SQS_TEXT } from 'keystone-idempotency/sqs';
import * as z from 'zod/mini';

/**
 * Largest single payment, in minor units: 999,999.99 in a two-decimal currency. It is the processor's own limit
 * (Stripe's, and the sandbox's): a larger amount passed our validation and was refused by the processor, which
 * surfaced as a 500 for what is the client's input.
 */
export const MAX_AMOUNT = 99_999_999;

/** ISO 4217 codes as the runtime's ICU knows them, lower-cased as they travel in the API (Stripe's convention). */
const CURRENCIES = Intl.supportedValuesOf('currency').map((code) => code.toLowerCase()) as [string, ...string[]];

/**
 * A client's text, held to what every hop of a payment can carry: XML 1.0 characters, that is no C0 control
 * character but tab, line feed and carriage return, no U+FFFE or U+FFFF and no unpaired surrogate. The description and
 * source go to the processor and come back in its webhooks, through SQS, which refuses any other character; our
 * receiver escapes them (`sqsMessageBody`), but the processor's other consumers need not. An unpaired surrogate is
 * not a character at all: it has no UTF-8 form, so whatever keeps or sends the text as UTF-8 makes it U+FFFD.
 * Refused here, where the client can fix it (a 400 naming the field), before anything is charged. Everything else
 * passes, astral characters (emoji) included.
 */
const text = (field: string) =>
  z.regex(
    SQS_TEXT,
    `${field} must not contain control characters other than tab and line breaks, U+FFFE, U+FFFF or unpaired surrogates`,
  );

/**
 * POST /payments body. Unknown fields are an error, not silently dropped: a typo must not become a payment.
 *
 * Written with `zod/mini`, zod's tree-shakable form (checks are functions passed to `.check()`, not methods): a
 * function bundles only the checks it uses, where `import { z } from 'zod'` brought all of zod (about 444 KB minified,
 * half of the payments function). Same core, same parsing, same JSON Schema: every check carries its own message.
 */
export const PaymentRequest = z.strictObject({
  amount: z
    .number({ error: 'amount must be a number' })
    .check(
      z.int('amount must be an integer number of minor units (cents)'),
      z.positive('amount must be positive'),
      z.maximum(MAX_AMOUNT, `amount must be at most ${MAX_AMOUNT}`),
    ),
  // An enum rather than a pattern and a lookup: the OpenAPI document then states the very list the check accepts.
  currency: z.enum(CURRENCIES, {
    error: (issue) =>
      typeof issue.input === 'string'
        ? 'currency must be a lower-case ISO 4217 code such as usd'
        : 'currency must be a string',
  }),
  source: z
    .string({ error: 'source must be a string' })
    .check(
      z.minLength(1, 'source is required'),
      z.maxLength(255, 'source must be at most 255 characters'),
      text('source'),
    ),
  description: z.optional(
    z
      .string({ error: 'description must be a string' })
      .check(z.maxLength(1000, 'description must be at most 1000 characters'), text('description')),
  ),
});
export type PaymentRequest = z.infer<typeof PaymentRequest>;

/**
 * A payment as the API answers it (the 201 of POST /payments, and GET /payments/{id}). The handlers' `Payment`
 * type is inferred from this schema and the OpenAPI document is generated from it, so what is sent and what is
 * documented are one definition. Strict: a field added to the row must be added here before it can be sent.
 */
export const Payment = z.strictObject({
  id: z.string().check(z.regex(/^pay_[0-9a-f]{24}$/)),
  amount: PaymentRequest.shape.amount,
  currency: PaymentRequest.shape.currency,
  source: PaymentRequest.shape.source,
  description: z.nullable(z.string()),
  /** `succeeded` once charged; `settled` once the processor's webhook for the charge has been processed. */
  status: z.enum(['succeeded', 'settled']),
  charge_id: z.string().check(z.minLength(1)),
  created_at: z.iso.datetime(),
  settled_at: z.nullable(z.iso.datetime()),
});
export type Payment = z.infer<typeof Payment>;
