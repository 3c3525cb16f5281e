import { createHash } from 'node:crypto';
import { mergeLines, ORDER_ID, type Order, type OrderRequest } from './schema';

/**
 * The order id is derived from the operation's downstream key, as the payment id is: every attempt, takeover and
 * recovery of one operation names the same order, so its charge's metadata, its shipment's reference and its email
 * are the same on every attempt (the processor refuses other metadata under one key; the warehouse is asked for
 * this reference).
 */
export function orderIdFor(downstreamKey: string): string {
  return `ord_${createHash('sha256').update(downstreamKey).digest('hex').slice(0, 24)}`;
}

/** Whether a string can be one of our order ids at all: anything else is answered 404 without a lookup. */
export function isOrderId(value: string | undefined): value is string {
  return value !== undefined && ORDER_ID.test(value);
}

const SKU = /^[a-z0-9_]{1,64}$/;

/** Whether a string can be a SKU at all: anything else is answered 404 without a lookup. */
export function isSku(value: string | undefined): value is string {
  return value !== undefined && SKU.test(value);
}

/** The order as its reservation writes it: pending, nothing charged, booked or sent yet. */
export function pendingOrder(id: string, request: OrderRequest, createdAt: string): Order {
  return {
    id,
    status: 'pending',
    items: mergeLines(request.items),
    amount: request.amount,
    currency: request.currency,
    email: request.email,
    charge_id: null,
    shipment_id: null,
    email_id: null,
    created_at: createdAt,
  };
}

/** The 201 that answers an order's creation, stored and replayed for its idempotency key. */
export function orderCreated(order: Order): {
  readonly statusCode: 201;
  readonly headers: { readonly 'Content-Type': 'application/json'; readonly Location: string };
  readonly body: string;
} {
  return {
    statusCode: 201,
    headers: { 'Content-Type': 'application/json', Location: `/orders/${order.id}` },
    body: JSON.stringify(order),
  };
}
