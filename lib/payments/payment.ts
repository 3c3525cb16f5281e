import { createHash } from 'node:crypto';
import type { Charge } from './processor-client';
import type { Payment } from './schema';

/**
 * The payment id is derived from the operation's downstream key, so every attempt and every owner of one operation
 * names the same payment (and sends the processor the same metadata, which it would otherwise reject as a
 * different request under the same key).
 */
export function paymentIdFor(downstreamKey: string): string {
  return `pay_${createHash('sha256').update(downstreamKey).digest('hex').slice(0, 24)}`;
}

const PAYMENT_ID = /^pay_[0-9a-f]{24}$/;

/** Whether a string can be one of our payment ids at all: anything else is answered 404 without a lookup. */
export function isPaymentId(value: string | undefined): value is string {
  return value !== undefined && PAYMENT_ID.test(value);
}

/**
 * What a charge carries in its metadata so that anyone holding the charge (the handler, a webhook, a recovery job)
 * can find its payment and the operation that made it, without a scan. Sent with every attempt of the operation,
 * always the same, as the processor requires for one idempotency key.
 */
export interface ChargeReference {
  readonly payment_id: string;
  readonly account_id: string;
  /** The stored idempotency key of the operation: where its record is. */
  readonly operation_key: string;
  /** The key the charge was made under: which generation of that operation it belongs to. */
  readonly downstream_key: string;
}

export function chargeReference(accountId: string, operationKey: string, downstreamKey: string): ChargeReference {
  return {
    payment_id: paymentIdFor(downstreamKey),
    account_id: accountId,
    operation_key: operationKey,
    downstream_key: downstreamKey,
  };
}

/** The reference a charge carries, or undefined for a charge made without one (by another system, or before). */
export function referenceOf(charge: {
  readonly metadata: Readonly<Record<string, string | undefined>>;
}): ChargeReference | undefined {
  const { payment_id, account_id, operation_key, downstream_key } = charge.metadata;
  if (!payment_id || !account_id || !operation_key || !downstream_key) return undefined;
  return { payment_id, account_id, operation_key, downstream_key };
}

/**
 * The payment a successful charge stands for. One function for the handler that made the charge and for recovery
 * that finds it later (a webhook, the completer), so both record the same row and answer the same 201: every field
 * comes from the charge, the creation time included.
 */
export function paymentFromCharge(charge: Charge, paymentId: string): Payment {
  return {
    id: paymentId,
    amount: charge.amount,
    currency: charge.currency,
    source: charge.source,
    description: charge.description ?? null,
    status: 'succeeded',
    charge_id: charge.id,
    created_at: new Date(charge.created * 1000).toISOString(),
    settled_at: null,
  };
}

/** The 201 that answers a payment's creation, and is stored and replayed for its idempotency key. */
export function paymentCreated(payment: Payment): {
  readonly statusCode: 201;
  readonly headers: { readonly 'Content-Type': 'application/json'; readonly Location: string };
  readonly body: string;
} {
  return {
    statusCode: 201,
    headers: { 'Content-Type': 'application/json', Location: `/payments/${payment.id}` },
    body: JSON.stringify(payment),
  };
}
