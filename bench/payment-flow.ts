import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { APIGatewayProxyResult } from 'aws-lambda';
import type { EffectItem } from 'keystone-idempotency/dynamodb';
import type { StoredResponse } from 'keystone-idempotency/engine';
import { paymentIdFor } from '../lib/payments/payment';
import type { Payment } from '../lib/payments/schema';
import type { PaymentsStore } from '../lib/payments/store';

/**
 * The payment-like work every micro-benchmark variant wraps: a "charge" at an outside processor (a no-op async call
 * standing in for it) and one payment row in the payments table, built by the service's own `PaymentsStore`, so the
 * row is byte for byte the one POST /payments writes.
 */

/** What a variant is called with: the parts of an API Gateway proxy event the payments route reads. */
export interface PaymentEvent {
  readonly httpMethod: 'POST';
  readonly resource: '/payments';
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  readonly requestContext: { readonly authorizer: { readonly accountId: string } };
}

export const OPERATION = 'POST /payments';

export function paymentEvent(accountId: string, key: string, body: object): PaymentEvent {
  return {
    httpMethod: 'POST',
    resource: '/payments',
    headers: { 'Idempotency-Key': key, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
    requestContext: { authorizer: { accountId } },
  };
}

export const CARD = { amount: 4200, currency: 'usd', source: 'tok_visa' } as const;
/** The same key with this body is a different request: the mismatch path. */
export const OTHER_CARD = { amount: 9900, currency: 'usd', source: 'tok_visa' } as const;

/** A downstream key for a variant that has none of its own (baseline, Powertools): one per execution. */
export function freshDownstreamKey(): string {
  return `idk_${randomUUID().replaceAll('-', '')}`;
}

/** The payment a first request records, and the 201 the handler answers with: the same whatever the store. */
export function paymentOf(
  event: PaymentEvent,
  downstreamKey: string,
  chargeId: string,
): { payment: Payment; response: StoredResponse & APIGatewayProxyResult } {
  const body = JSON.parse(event.body) as { amount: number; currency: string; source: string };
  const payment: Payment = {
    id: paymentIdFor(downstreamKey),
    amount: body.amount,
    currency: body.currency,
    source: body.source,
    description: null,
    status: 'succeeded',
    charge_id: chargeId,
    created_at: new Date().toISOString(),
    settled_at: null,
  };
  return {
    payment,
    response: {
      statusCode: 201,
      headers: { 'Content-Type': 'application/json', Location: `/payments/${payment.id}` },
      body: JSON.stringify(payment),
    },
  };
}

/** The payment row (as a transaction item, like the service stages it) and the 201 the handler answers with. */
export function settlePayment(
  payments: PaymentsStore,
  event: PaymentEvent,
  downstreamKey: string,
  chargeId: string,
): { row: EffectItem; response: StoredResponse & APIGatewayProxyResult } {
  const { payment, response } = paymentOf(event, downstreamKey, chargeId);
  return { row: payments.putPayment(event.requestContext.authorizer.accountId, payment, downstreamKey), response };
}

/**
 * The outside processor, reduced to a no-op async call (`await Promise.resolve()`), so the benchmark measures the
 * idempotency machinery and not a network; or, with `latencyMs`, a call that takes that long (a timer: no CPU), for
 * the storms where what matters is what a call holds while it waits. It counts its calls (the witness for "ran the
 * effect") and can hold a call open, which is how a variant is put in the "in flight" state: its claim is written,
 * its effect not yet done.
 */
export class ExternalEffect {
  calls = 0;
  /** How long each call takes (0: a resolved promise). */
  latencyMs = 0;
  private readonly gates = new Map<string, { opened: Promise<void>; entered: () => void }>();

  async charge(key: string): Promise<string> {
    this.calls++;
    const gate = this.gates.get(key);
    if (gate) {
      gate.entered();
      await gate.opened;
    } else if (this.latencyMs > 0) {
      await sleep(this.latencyMs);
    } else {
      await Promise.resolve();
    }
    return `ch_${this.calls}`;
  }

  /**
   * The next charge under `key` waits until `open()`. `entered` settles once the charge has started, i.e. once the
   * variant's claim is in the table.
   */
  hold(key: string): { entered: Promise<void>; open(): void } {
    let open!: () => void;
    let entered!: () => void;
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    const started = new Promise<void>((resolve) => {
      entered = resolve;
    });
    this.gates.set(key, { opened, entered });
    return {
      entered: started,
      open: () => {
        this.gates.delete(key);
        open();
      },
    };
  }
}
