import { MAX_KEY_LENGTH } from 'keystone-idempotency/engine';
import * as z from 'zod/mini';

/**
 * The processor's `charge.succeeded` webhook event, as much of it as we rely on. Unknown fields are allowed here,
 * unlike in our own API: a provider adds fields over time, and rejecting its events for that would lose them.
 * (They are dropped from the parsed event: only what is declared here travels on to settlement.)
 *
 * The charge is declared in full, with the reference our handler put in its metadata, because settlement may have
 * to record the payment from the charge alone when the client that made it never came back.
 */
const nonEmpty = () => z.string().check(z.minLength(1));
const count = () => z.number().check(z.int(), z.nonnegative());

export const ChargeSucceededEvent = z.object({
  // The id is the receiver's idempotency key: bounded here, so that a longer one is an `invalid-body` naming `id`,
  // stated in the document, rather than a key the idempotency middleware turns away after validation.
  id: z
    .string()
    .check(
      z.regex(/^evt_[A-Za-z0-9_]+$/, 'id must be an event id (evt_...)'),
      z.maxLength(MAX_KEY_LENGTH, `id must be at most ${MAX_KEY_LENGTH} characters`),
    ),
  type: z.literal('charge.succeeded'),
  created: count(),
  data: z.object({
    object: z.object({
      id: nonEmpty(),
      amount: z.number().check(z.int(), z.positive()),
      currency: z.string().check(z.minLength(3)),
      source: nonEmpty(),
      description: z.optional(z.nullable(z.string())),
      status: nonEmpty(),
      created: count(),
      metadata: z.object({
        payment_id: nonEmpty(),
        account_id: nonEmpty(),
        // Present on every charge this service makes: where the operation's record is, and which generation.
        operation_key: z.optional(nonEmpty()),
        downstream_key: z.optional(nonEmpty()),
      }),
    }),
  }),
});
export type ChargeSucceededEvent = z.infer<typeof ChargeSucceededEvent>;

/**
 * Our answer to a webhook we accepted (200): the event id, so the processor's logs can match it. A replay of the
 * same event answers the same body with `Idempotent-Replayed: true`.
 */
export const WebhookAcknowledgement = z.strictObject({ received: ChargeSucceededEvent.shape.id });
export type WebhookAcknowledgement = z.infer<typeof WebhookAcknowledgement>;
