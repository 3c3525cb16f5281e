import { SQS_TEXT } from 'keystone-idempotency/sqs';
import * as z from 'zod/mini';
import { Amount, Currency, sourceLength } from '../payments/payment-schema';
import { ORDER_STATUSES, ORDER_STEPS, STEP_STATES } from './steps';

/**
 * POST /orders and what the orders API answers, as zod schemas: the handlers validate and type by them, and the
 * OpenAPI document is generated from them.
 */

/** The most lines one order may hold: each is a stock update committed with the reservation, in one transaction. */
export const MAX_ORDER_LINES = 10;
/** The most units of one SKU an order may ask for, its lines added up: the warehouse's limit per line. */
export const MAX_LINE_QUANTITY = 1_000_000;

/** The rule on `items` that JSON Schema can't state, in words for the OpenAPI document (its tests read it). */
export const MERGED_QUANTITY_RULE = `Lines naming one SKU are added up, and may add up to at most ${MAX_LINE_QUANTITY} units of it.`;

export const Sku = z
  .string({ error: 'sku must be a string' })
  .check(z.regex(/^[a-z0-9_]{1,64}$/, 'sku must be 1 to 64 lower-case letters, digits or underscores'));

export const OrderLine = z.strictObject({
  sku: Sku,
  quantity: z
    .number({ error: 'quantity must be a number' })
    .check(
      z.int('quantity must be an integer'),
      z.positive('quantity must be positive'),
      z.maximum(MAX_LINE_QUANTITY, `quantity must be at most ${MAX_LINE_QUANTITY}`),
    ),
});
export type OrderLine = z.infer<typeof OrderLine>;

/**
 * An email address without control characters (C0, DEL, C1) or lone surrogates: mail providers refuse them, and
 * PostgreSQL's jsonb can keep neither NUL nor a lone surrogate (a step's result holds the address), so the order was
 * told to retry for ever there and confirmed on DynamoDB. Surrogate pairs (astral characters) are fine. One pattern, so
 * the OpenAPI document states it whole.
 */
const EMAIL_CHAR = String.raw`(?:[^\s@\x00-\x1F\x7F-\x9F\uD800-\uDFFF]|[\uD800-\uDBFF][\uDC00-\uDFFF])`;
export const EMAIL = new RegExp(`^${EMAIL_CHAR}+@${EMAIL_CHAR}+$`);

/**
 * POST /orders body. Unknown fields are an error, as for payments: a typo must not become an order. Two lines may name
 * one SKU: the order adds them up ({@link mergeLines}), and what it adds up must stay within {@link MAX_LINE_QUANTITY},
 * the warehouse's limit per line, or the order would be charged and then refused by the warehouse.
 */
export const OrderRequest = z.strictObject({
  items: z.array(OrderLine).check(
    z.minLength(1, 'items must hold at least one line'),
    z.maxLength(MAX_ORDER_LINES, `items must hold at most ${MAX_ORDER_LINES} lines`),
    z.describe(MERGED_QUANTITY_RULE),
    z.superRefine((lines, context) => {
      for (const { sku, quantity } of mergeLines(lines)) {
        if (quantity <= MAX_LINE_QUANTITY) continue;
        context.addIssue({
          code: 'custom',
          input: lines,
          message: `the lines of ${sku} add up to ${quantity} units: at most ${MAX_LINE_QUANTITY} of one SKU`,
        });
      }
    }),
  ),
  amount: Amount,
  currency: Currency,
  source: z
    .string({ error: 'source must be a string' })
    .check(...sourceLength, z.regex(SQS_TEXT, 'source must not contain control characters')),
  email: z
    .string({ error: 'email must be a string' })
    .check(
      z.maxLength(254, 'email must be at most 254 characters'),
      z.regex(EMAIL, 'email must be an email address, without control characters or lone surrogates'),
    ),
});
export type OrderRequest = z.infer<typeof OrderRequest>;

export const ORDER_ID = /^ord_[0-9a-f]{24}$/;

export { ORDER_STEPS, type OrderStepName, STEP_STATES, type StepState } from './steps';

/** One step of an order as GET /orders/{id} shows it; each state is in lib/orders/steps.ts and docs/orders.md. */
export const OrderStep = z.strictObject({
  name: z.enum(ORDER_STEPS),
  state: z.enum(STEP_STATES),
  /** What the step produced: the charge, shipment, email or (`refunded`) refund id; none for the reservation. */
  ref: z.nullable(z.string()),
});
export type OrderStep = z.infer<typeof OrderStep>;

/** An order as POST /orders answers it (201). */
export const Order = z.strictObject({
  id: z.string().check(z.regex(ORDER_ID)),
  /**
   * `pending` while its steps run; `confirmed` once charged, shipped and confirmed (or the mailer refused the
   * confirmation); `declined` when the processor refused the card (nothing charged, the stock given back);
   * `refused` when an outside system refused a step after the charge (the charge refunded, the stock given back).
   */
  status: z.enum(ORDER_STATUSES),
  items: z.array(OrderLine),
  amount: Amount,
  currency: Currency,
  email: z.string(),
  charge_id: z.nullable(z.string()),
  shipment_id: z.nullable(z.string()),
  email_id: z.nullable(z.string()),
  created_at: z.iso.datetime(),
});
export type Order = z.infer<typeof Order>;

/** GET /orders/{id}: the order and each step's state. */
export const OrderWithSteps = z.extend(Order, { steps: z.array(OrderStep) });
export type OrderWithSteps = z.infer<typeof OrderWithSteps>;

/** GET /inventory/{sku}. */
export const Inventory = z.strictObject({
  sku: Sku,
  /** Units that can still be ordered. */
  available: z.number().check(z.int(), z.minimum(0)),
  /** Units orders hold. */
  reserved: z.number().check(z.int(), z.minimum(0)),
});
export type Inventory = z.infer<typeof Inventory>;

/**
 * The lines of an order, one per SKU (quantities of repeated SKUs added up), in the order each SKU first appears: what
 * is reserved, shipped and shown. One stock update per SKU is also what a DynamoDB transaction requires (one action
 * per item).
 */
export function mergeLines(lines: readonly OrderLine[]): OrderLine[] {
  const merged = new Map<string, number>();
  for (const line of lines) merged.set(line.sku, (merged.get(line.sku) ?? 0) + line.quantity);
  return [...merged].map(([sku, quantity]) => ({ sku, quantity }));
}
