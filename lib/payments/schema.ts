import { SQS_TEXT } from 'keystone-idempotency/sqs';
import * as z from 'zod/mini';
import {
  Amount,
  Currency,
  DESCRIPTION_MAX_LENGTH,
  type PaymentRequest as PaymentRequestFields,
  sourceLength,
} from './payment-schema';

/** The payment as the API answers it: in payment-schema.ts, which the browser client imports without the server's. */
export { MAX_AMOUNT, Payment } from './payment-schema';

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
  amount: Amount,
  currency: Currency,
  source: z.string({ error: 'source must be a string' }).check(...sourceLength, text('source')),
  description: z.optional(
    z
      .string({ error: 'description must be a string' })
      .check(
        z.maxLength(DESCRIPTION_MAX_LENGTH, `description must be at most ${DESCRIPTION_MAX_LENGTH} characters`),
        text('description'),
      ),
  ),
});
export type PaymentRequest = z.infer<typeof PaymentRequest>;

// The server's request and the client's have one shape: a field added to one and not the other fails to compile.
const sameShape: [PaymentRequest, PaymentRequestFields] extends [PaymentRequestFields, PaymentRequest] ? true : never =
  true;
void sameShape;
