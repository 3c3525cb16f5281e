import type { APIGatewayProxyResult } from 'aws-lambda';
import {
  EffectConditionFailedError,
  type IdempotencyHandle,
  StepOutcomeUnknownError,
  StepRefusedError,
  type StoredResponse,
} from 'keystone-idempotency/engine';
import { problemResponse } from 'keystone-idempotency/http';
// The problem types from their own module: problems.ts builds zod schemas (for the OpenAPI document) at import.
import { PaymentProblemType, PROBLEM_TYPE_BASE } from '../payments/problem-types';
import type { CardDeclinedProblem, InsufficientStockProblem, PaymentRejectedProblem } from '../payments/problems';
import type { ProcessorClient } from '../payments/processor-client';
import type { OrderMailerClient } from './mailer-client';
import { orderCreated, orderIdFor, pendingOrder } from './order';
import type { OrdersRepository, Shortage } from './repository';
import { mergeLines, type Order, type OrderRequest } from './schema';
import type { WarehouseClient } from './warehouse-client';

export interface CreateOrderDeps<TEffect> {
  readonly orders: OrdersRepository<TEffect>;
  readonly processor: ProcessorClient;
  readonly warehouse: WarehouseClient;
  readonly mailer: OrderMailerClient;
  readonly clock: { now(): number };
}

/**
 * What each step checkpoints: plain JSON, the same on every attempt that reads it back. The reservation carries the
 * order's request, so that recovery can drive an order whose client never came back from its record alone.
 */
export type Reservation = { readonly request: OrderRequest } & (
  | { readonly kind: 'reserved'; readonly createdAt: string }
  | { readonly kind: 'short'; readonly shortages: Shortage[] }
);
type Payment =
  | { readonly kind: 'charged'; readonly chargeId: string }
  | { readonly kind: 'declined'; readonly code: string; readonly message: string }
  | { readonly kind: 'rejected'; readonly param: string; readonly message: string };

/**
 * POST /orders, as four recovery points of one idempotent operation, each checkpointed with its local writes and
 * never run again once completed, whichever attempt, takeover or recovery resumes the operation:
 *
 * ```
 *  reserve (local: the pending order, its reservation, the stock, committed with the checkpoint)
 *   └► charge  (processor: dedupes by key, the step's downstream key forwarded)
 *       └► ship    (warehouse: NO key; a step found started is resolved by asking for the order's reference, and
 *           │       "none" is believed only once a booking sent then can no longer land)
 *           └► notify (mailer: dedupes by key, the step's downstream key forwarded)
 *               └► completion: the order confirmed, and the 201 stored with the key
 * ```
 *
 * A decline (402) or a card the processor refuses (422) ends the order there, its reservation given back in the same
 * commit as the stored answer; too little stock (409) ends it before anything is reserved. A warehouse that refuses
 * the shipment for good ends it after the charge: the refusal is recorded with the order marked refused, the charge is
 * refunded and the stock given back (the steps' compensations, run by whichever attempt or recovery run meets the
 * refusal, until both have), then the 422 is stored. An outside system that does not answer is a 5xx with
 * Retry-After, not stored: the retry under the same key resumes after the last completed step. The order id comes
 * from the operation's downstream key, so every attempt names the same order.
 */
export async function createOrder<TEffect>(
  deps: CreateOrderDeps<TEffect>,
  input: { accountId: string; body: OrderRequest; idempotency: IdempotencyHandle<TEffect> },
): Promise<APIGatewayProxyResult> {
  try {
    return await placeOrder(deps, input);
  } catch (error) {
    // An order that can't go on now answers 5xx (or 409) with Retry-After, never stored. A refusal goes on to the
    // idempotency middleware, which compensates and answers the stored refusal.
    const later = notFinishedYet(error);
    if (later) return later;
    throw error;
  }
}

/**
 * The order's steps, as {@link createOrder} and recovery run them: answers what is stored (201, 402, 409, 422), and
 * throws what is not: an outside system that did not answer ({@link OutsideUnavailableError}), a booking whose outcome
 * can't be known yet (`StepOutcomeUnknownError`), stock that moved ({@link StockContendedError}), and a refusal for good
 * (`StepRefusedError`, which the engine compensates and stores).
 */
export async function placeOrder<TEffect>(
  deps: CreateOrderDeps<TEffect>,
  input: { accountId: string; body: OrderRequest; idempotency: IdempotencyHandle<TEffect> },
): Promise<APIGatewayProxyResult> {
  const { accountId, body, idempotency } = input;
  const orderId = orderIdFor(idempotency.downstreamKey);
  const items = mergeLines(body.items);
  const reservation = await idempotency
    .step(
      'reserve',
      async (step): Promise<Reservation> => {
        const shortages = await deps.orders.shortages(items);
        if (shortages.length > 0) return { kind: 'short', shortages, request: body };
        const createdAt = new Date(deps.clock.now()).toISOString();
        step.stage(...deps.orders.reserve(accountId, pendingOrder(orderId, body, createdAt), idempotency.key));
        return { kind: 'reserved', createdAt, request: body };
      },
      {
        // The order was refused after its charge: the stock it holds goes back.
        compensate: async (reserved, step) => {
          if (reserved.kind !== 'reserved') return;
          step.stage(
            ...deps.orders.release(accountId, orderId, items),
            deps.orders.markStep(accountId, orderId, 'reserve', null, 'released'),
          );
        },
      },
    )
    .catch(async (error: unknown) => {
      // The stock's own condition refused the reservation at its commit: another order took the units between
      // this one's check and its write, and nothing of this one was written. Too little stock now is the same
      // stored answer as too little at the check; stock that came back meanwhile is a race to retry, not a 500.
      if (!(error instanceof EffectConditionFailedError)) throw error;
      const shortages = await deps.orders.shortages(items);
      if (shortages.length > 0) return { kind: 'short', shortages, request: body } as const;
      throw new StockContendedError({ cause: error });
    });
  if (reservation.kind === 'short') return insufficientStock(reservation.shortages);
  const order = pendingOrder(orderId, body, reservation.createdAt);

  const payment = await idempotency.step(
    'charge',
    async (step): Promise<Payment> => {
      const outcome = await deps.processor.charge(
        {
          amount: body.amount,
          currency: body.currency,
          source: body.source,
          description: `Order ${orderId}`,
          metadata: {
            order_id: orderId,
            account_id: accountId,
            operation_key: idempotency.key,
            downstream_key: step.downstreamKey,
          },
        },
        step.downstreamKey,
      );
      switch (outcome.kind) {
        case 'charged':
          step.stage(deps.orders.markStep(accountId, orderId, 'charge', outcome.charge.id));
          return { kind: 'charged', chargeId: outcome.charge.id };
        case 'declined':
          return { kind: 'declined', code: outcome.code, message: outcome.message };
        case 'unavailable':
          throw new OutsideUnavailableError(PaymentProblemType.processorUnavailable, 'Payment processor', outcome);
        case 'rejected':
          if (outcome.param !== undefined && CLIENT_FIELDS.has(outcome.param.split('.')[0] ?? '')) {
            return { kind: 'rejected', param: outcome.param, message: outcome.message };
          }
          throw new Error(`processor rejected the order's charge (${outcome.status}): ${outcome.message}`);
      }
    },
    {
      outside: 'dedupes',
      // The order was refused after its charge: the money goes back, under the compensation's own key, so a refund
      // sent again (a retry, a crash mid-refund) is the processor's replay, not a second refund.
      compensate: async (paid, step) => {
        if (paid.kind !== 'charged') return;
        const refund = await deps.processor.refund(paid.chargeId, step.downstreamKey);
        if (refund.kind === 'refunded') {
          step.stage(deps.orders.markStep(accountId, orderId, 'charge', refund.refund.id, 'refunded'));
        } else if (refund.kind === 'rejected' && refund.code === 'charge_already_refunded') {
          step.stage(deps.orders.markStep(accountId, orderId, 'charge', null, 'refunded'));
        } else if (refund.kind === 'unavailable') {
          throw new OutsideUnavailableError(PaymentProblemType.processorUnavailable, 'Payment processor', refund);
        } else {
          throw new Error(`the processor refused the refund of ${paid.chargeId} (${refund.status}): ${refund.message}`);
        }
      },
    },
  );
  if (payment.kind !== 'charged') {
    idempotency.stage(
      ...deps.orders.release(accountId, orderId, items),
      deps.orders.complete(accountId, orderId, {
        status: 'declined',
        charge_id: null,
        shipment_id: null,
        email_id: null,
      }),
    );
    return payment.kind === 'declined' ? cardDeclined(payment) : paymentRejected(payment);
  }

  const shipmentId = await idempotency.step<string>(
    'ship',
    async (step): Promise<string> => {
      const outcome = await deps.warehouse.book(orderId, items);
      switch (outcome.kind) {
        case 'booked':
          step.stage(deps.orders.markStep(accountId, orderId, 'ship', outcome.shipment.id));
          return outcome.shipment.id;
        case 'refused':
          // For good: the order ends here, marked refused with the refusal's record; the engine then refunds the
          // charge and gives the stock back (the compensations above), and stores the 422.
          step.stage(
            deps.orders.refuse(accountId, orderId, { step: 'ship', charge_id: payment.chargeId, shipment_id: null }),
          );
          throw new StepRefusedError(
            'ship',
            `the warehouse refused the order (${outcome.status}): ${outcome.message}`,
            {
              response: storedAnswer(shipmentRefused()),
            },
          );
        case 'unavailable':
          throw new OutsideUnavailableError(PaymentProblemType.warehouseUnavailable, 'Warehouse', outcome);
      }
    },
    {
      // The warehouse books a new shipment on every call: a booking whose answer was lost is looked up by the
      // order's reference, never made blindly again, nor while one sent earlier may still land.
      resolve: async (step) => {
        const found = await deps.warehouse.find(orderId);
        switch (found.kind) {
          case 'found':
            step.stage(deps.orders.markStep(accountId, orderId, 'ship', found.shipment.id));
            return { found: found.shipment.id };
          case 'none':
            return { notFound: true };
          default:
            return { unknown: true }; // making it still, down, or an answer that says nothing
        }
      },
      landsWithinMs: deps.warehouse.landsWithinMs,
    },
  );

  const emailId = await idempotency.step(
    'notify',
    async (step): Promise<string | null> => {
      const outcome = await deps.mailer.send(
        confirmationEmail(order, payment.chargeId, shipmentId),
        step.downstreamKey,
      );
      switch (outcome.kind) {
        case 'sent':
          return outcome.id;
        case 'refused':
          // The order stands (paid and shipped): only its confirmation could not be sent. Its notify step shows it.
          return null;
        case 'unavailable':
          throw new OutsideUnavailableError(PaymentProblemType.mailerUnavailable, 'Mailer', outcome);
      }
    },
    // The mailer keeps our key per email: the step's downstream key is enough, no lookup needed.
    { outside: 'dedupes' },
  );

  const outcome = {
    status: 'confirmed',
    charge_id: payment.chargeId,
    shipment_id: shipmentId,
    email_id: emailId,
  } as const;
  idempotency.stage(deps.orders.complete(accountId, orderId, outcome));
  return orderCreated({ ...order, ...outcome });
}

/** What an order that can't go on now answers: 5xx with Retry-After, not stored. Undefined for anything else. */
function notFinishedYet(error: unknown): APIGatewayProxyResult | undefined {
  if (error instanceof OutsideUnavailableError || error instanceof StockContendedError) return error.response();
  // The booking was started before and can't be looked up now, or may still land: come back when it can be known.
  if (error instanceof StepOutcomeUnknownError && error.step === 'ship') {
    const retryAfterSeconds = Math.max(1, Math.ceil((error.retryAfterMs ?? 1000) / 1000));
    return new OutsideUnavailableError(PaymentProblemType.warehouseUnavailable, 'Warehouse', {
      status: 503,
      retryAfterSeconds,
    }).response();
  }
  return undefined;
}

const CLIENT_FIELDS: ReadonlySet<string> = new Set(['amount', 'currency', 'source']);

function confirmationEmail(order: Order, chargeId: string, shipmentId: string) {
  const lines = order.items.map((line) => `  ${line.quantity} x ${line.sku}`).join('\n');
  return {
    to: order.email,
    subject: `Order ${order.id} confirmed`,
    text: `Thank you for your order ${order.id}.\n${lines}\nCharge ${chargeId}, shipment ${shipmentId}.`,
    metadata: { order_id: order.id },
  };
}

function insufficientStock(shortages: Shortage[]): APIGatewayProxyResult {
  const problem: InsufficientStockProblem = {
    type: PaymentProblemType.insufficientStock,
    title: 'Insufficient stock',
    status: 409,
    detail: 'The stock cannot cover every line of this order. Nothing was reserved or charged.',
    shortages,
  };
  return problemResponse(problem, {}, PROBLEM_TYPE_BASE);
}

function cardDeclined(payment: { code: string; message: string }): APIGatewayProxyResult {
  const problem: CardDeclinedProblem = {
    type: PaymentProblemType.cardDeclined,
    title: 'Card declined',
    status: 402,
    detail: `${payment.message} The order's reservation was released.`,
    decline_code: payment.code,
  };
  return problemResponse(problem, {}, PROBLEM_TYPE_BASE);
}

function paymentRejected(payment: { param: string; message: string }): APIGatewayProxyResult {
  const problem: PaymentRejectedProblem = {
    type: PaymentProblemType.paymentRejected,
    title: 'Payment rejected by the processor',
    status: 422,
    detail: 'The payment processor refused a value of this order. Fix it and send a new request.',
    errors: [{ path: payment.param, message: payment.message }],
  };
  return problemResponse(problem, {}, PROBLEM_TYPE_BASE);
}

/** The warehouse's own words stay in the refusal's message (logs): a client is told what it can act on. */
function shipmentRefused(): APIGatewayProxyResult {
  return problemResponse(
    {
      type: PaymentProblemType.shipmentRefused,
      title: 'Shipment refused',
      status: 422,
      detail:
        'The warehouse refused to ship this order. The charge was refunded and the stock given back; the order is ' +
        'refused. A new order (with a new key) may be shipped.',
    },
    {},
    PROBLEM_TYPE_BASE,
  );
}

/** An answer as the engine stores it: its headers as strings. */
export function storedAnswer(response: APIGatewayProxyResult): StoredResponse {
  return {
    statusCode: response.statusCode,
    headers: Object.fromEntries(Object.entries(response.headers ?? {}).map(([name, value]) => [name, String(value)])),
    body: response.body,
  };
}

/**
 * An outside system did not answer a step: the step stays unfinished (not checkpointed), the operation answers a
 * 5xx with Retry-After that is not stored, and the retry under the same key resumes at this step.
 */
class OutsideUnavailableError extends Error {
  constructor(
    readonly slug: string,
    readonly system: string,
    readonly outcome: { readonly status?: number; readonly retryAfterSeconds?: number; readonly reason?: string },
  ) {
    super(`${system} unavailable (${outcome.status ?? outcome.reason ?? 'no answer'})`);
    this.name = 'OutsideUnavailableError';
  }

  response(): APIGatewayProxyResult {
    const status =
      this.outcome.reason === 'timeout' ? 504 : this.outcome.status === 503 || this.outcome.status === 429 ? 503 : 502;
    return problemResponse(
      {
        type: this.slug,
        title: `${this.system} unavailable`,
        status,
        detail:
          `The ${this.system.toLowerCase()} did not answer: the order is kept as far as it got. Retry with the same ` +
          'Idempotency-Key: no step that completed runs again.',
      },
      { 'Retry-After': String(this.outcome.retryAfterSeconds ?? 1) },
      PROBLEM_TYPE_BASE,
    );
  }
}

/** The stock moved under a reservation and back (the units taken, then released): nothing was reserved; retry. */
class StockContendedError extends Error {
  constructor(options?: { cause?: unknown }) {
    super('the stock changed while the order reserved it', options);
    this.name = 'StockContendedError';
  }

  response(): APIGatewayProxyResult {
    return problemResponse(
      {
        type: PaymentProblemType.stockContended,
        title: 'Stock contended',
        status: 503,
        detail:
          'Other orders changed the stock of these items while this one reserved it; nothing was reserved or ' +
          'charged. Retry with the same Idempotency-Key.',
      },
      { 'Retry-After': '1' },
      PROBLEM_TYPE_BASE,
    );
  }
}
