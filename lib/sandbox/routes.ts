import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { buildCharge, type Charge, declineBody, isDeclined, parseChargeRequest } from './charges';
import { buildEmail, type Email, parseEmailRequest } from './emails';
import { ErrorType, internalErrorBody, invalidBody, invalidRequest, SandboxApiError } from './errors';
import { chargeSucceeded, type ProcessorEvent } from './events';
import { type FaultQueue, parseFault } from './faults';
import { readJson, sendJson } from './http';
import {
  type FaultedEndpoint,
  fingerprintBody,
  type IdempotentEndpoint,
  requireIdempotencyKey,
  type StoredResponse,
  serveIdempotently,
  serveOnce,
} from './idempotent-endpoint';
import { decideRefund, parseRefundRequest, type Refund } from './refunds';
import { type BookingsInProgress, buildShipment, parseShipmentRequest, type Shipment } from './shipments';
import type { WebhookSender } from './webhook-sender';

/**
 * The sandbox's HTTP surface. `/v1/*` is what a client of the real processor or mailer calls; the other routes
 * are the sandbox's own controls and witnesses (what was charged, sent, emitted; which faults are pending).
 *
 *   POST   /v1/charges          Idempotency-Key + {amount, currency, source, description?, metadata?}
 *                                                                                       201 | 402 | 400 | 503
 *   GET    /v1/charges?idempotency_key=K   the charge made under K: {data: [charge]} or {data: []};
 *                                          409 while the first request with K is still working
 *   POST   /v1/emails           Idempotency-Key + {to, subject, text, metadata?}          201 | 400 | 503
 *   POST   /v1/shipments        {reference, items: [{sku, quantity}]}: books a NEW shipment on every call, any
 *                                Idempotency-Key ignored (the warehouse keeps none)               201 | 400 | 503
 *   GET    /v1/shipments?reference=R   the shipments booked for R: {data: [shipment, ...]};
 *                                       409 while a booking for R is still being made
 *   POST   /v1/refunds          Idempotency-Key + {charge, amount?, metadata?}: gives back what is left of the charge,
 *                                or amount of it; an unknown charge, one refunded in full, or more than is left: 400
 *                                                                                       201 | 400 | 503
 *   GET    /charges             successful charges only (a decline moved no money)
 *   GET    /refunds             refunds made
 *   GET    /emails              emails sent
 *   GET    /shipments           shipments booked
 *   GET    /events              events emitted (charge.succeeded)
 *   POST   /__faults            {mode: delay|error_503|drop_after_charge|delay_after_charge|outage|in_transit, ms?,
 *                                count?, target?: charges|refunds|emails|shipments}  (outage: every request 503 for ms;
 *                                in_transit: a booking held ms before the warehouse receives it, shipments only)
 *   GET    /__faults            pending faults;  DELETE /__faults clears them
 *   POST   /__webhooks/resend   {event_id, times?}: concurrent, single-attempt redeliveries and their statuses
 *   GET    /__webhooks          {enabled, url};  PUT /__webhooks {enabled}: stop or resume delivering new events
 */

/** Everything the routes read and change: one sandbox's in-memory world. */
export interface SandboxContext {
  readonly charges: Charge[];
  readonly refunds: Refund[];
  readonly emails: Email[];
  readonly shipments: Shipment[];
  readonly events: ProcessorEvent[];
  readonly faults: FaultQueue;
  readonly chargeEndpoint: IdempotentEndpoint;
  readonly refundEndpoint: IdempotentEndpoint;
  readonly emailEndpoint: IdempotentEndpoint;
  readonly shipmentEndpoint: FaultedEndpoint;
  /** Bookings received and not finished: their reference's lookup answers 409 meanwhile. */
  readonly bookingsInProgress: BookingsInProgress;
  /** Absent when no webhook URL was configured: events are still recorded, just not delivered. */
  readonly webhooks: WebhookSender | undefined;
  /** Whether new events are delivered now (`PUT /__webhooks`). */
  readonly webhookDelivery: { enabled: boolean };
  readonly nowSeconds: () => number;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** The most deliveries one resend may ask for: enough to provoke any race, too few to flood a receiver. */
const MAX_RESEND_TIMES = 100;

const webhookSwitchSchema = z.strictObject({ enabled: z.boolean() });

const resendSchema = z.strictObject({
  event_id: z.string().min(1),
  times: z.number().int().min(1).max(MAX_RESEND_TIMES).default(1),
});

/** The route table, keyed by `METHOD /path`. */
export function sandboxRoutes(context: SandboxContext): Record<string, Handler> {
  return {
    'POST /v1/charges': (req, res) => createCharge(context, req, res),
    'GET /v1/charges': (req, res) => findCharge(context, req, res),
    'GET /charges': async (_req, res) => sendJson(res, 200, context.charges),
    'POST /v1/refunds': (req, res) => createRefund(context, req, res),
    'GET /refunds': async (_req, res) => sendJson(res, 200, context.refunds),
    'POST /v1/emails': (req, res) => sendEmail(context, req, res),
    'GET /emails': async (_req, res) => sendJson(res, 200, context.emails),
    'POST /v1/shipments': (req, res) => bookShipment(context, req, res),
    'GET /v1/shipments': (req, res) => findShipments(context, req, res),
    'GET /shipments': async (_req, res) => sendJson(res, 200, context.shipments),
    'GET /events': async (_req, res) => sendJson(res, 200, context.events),
    'POST /__faults': (req, res) => addFault(context, req, res),
    'GET /__faults': async (_req, res) => sendJson(res, 200, context.faults.list()),
    'DELETE /__faults': async (_req, res) => {
      context.faults.clear();
      sendJson(res, 200, context.faults.list());
    },
    'POST /__webhooks/resend': (req, res) => resendWebhook(context, req, res),
    'GET /__webhooks': async (_req, res) => sendJson(res, 200, webhookState(context)),
    'PUT /__webhooks': async (req, res) => {
      const parsed = webhookSwitchSchema.safeParse(await readJson(req));
      if (!parsed.success) throw invalidBody('webhook switch', parsed.error);
      context.webhookDelivery.enabled = parsed.data.enabled;
      sendJson(res, 200, webhookState(context));
    },
  };
}

/**
 * Routes one request and maps any error onto a response: a {@link SandboxApiError} as itself, anything else as a
 * bare 500 (no message or stack leaves the process).
 */
export function routeRequest(routes: Record<string, Handler>): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    void dispatch(routes, req, res);
  };
}

async function dispatch(routes: Record<string, Handler>, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = new URL(req.url ?? '/', 'http://sandbox').pathname;
  const handler = routes[`${req.method} ${path}`];
  try {
    if (!handler) throw invalidRequest(`Unrecognized request URL (${req.method}: ${path}).`, 404);
    await handler(req, res);
  } catch (error) {
    if (error instanceof SandboxApiError) sendJson(res, error.statusCode, error.toBody());
    else sendJson(res, 500, internalErrorBody());
  }
}

async function createCharge(context: SandboxContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const key = requireIdempotencyKey(req);
  const body = await readJson(req);
  const request = parseChargeRequest(body);
  await serveIdempotently(res, context.chargeEndpoint, {
    key,
    fingerprint: fingerprintBody(body),
    perform: () => {
      if (isDeclined(request)) return { status: 402, body: declineBody() };
      return { status: 201, body: recordCharge(context, buildCharge(request, key, context.nowSeconds())) };
    },
  });
}

/** Keeps a new charge and announces it; the webhook goes out in the background (unless delivery is off). */
function recordCharge(context: SandboxContext, charge: Charge): Charge {
  context.charges.push(charge);
  const event = chargeSucceeded(charge, context.nowSeconds());
  context.events.push(event);
  if (context.webhookDelivery.enabled) context.webhooks?.dispatch(event);
  return charge;
}

/**
 * The charge made under an idempotency key, for a client that lost the answer and has no body to send again (a
 * recovery job). Processors offer such a lookup by the merchant's reference. While the first request with the key
 * is still working the outcome is unknown, and the answer says so (409, like a request that reuses a key in use)
 * rather than "no charge", which a caller could take as final.
 */
async function findCharge(context: SandboxContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const key = new URL(req.url ?? '/', 'http://sandbox').searchParams.get('idempotency_key');
  if (!key) throw invalidRequest('The idempotency_key query parameter is required.');
  if (context.chargeEndpoint.ledger.isRunning(key)) {
    throw new SandboxApiError(
      409,
      ErrorType.idempotency,
      'A request with this idempotency key is still being processed. Try again later.',
      'idempotency_key_in_use',
    );
  }
  const data = context.charges.filter((charge) => charge.idempotency_key === key);
  sendJson(res, 200, { object: 'list', data });
}

/**
 * Gives money back on a charge: all of what is left, or `amount` of it. Idempotent by key like a charge (a retry with
 * the key replays the refund, or the refusal); a charge it does not know, one refunded in full, or more than is left is
 * a 400 (see {@link decideRefund}).
 */
async function createRefund(context: SandboxContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const key = requireIdempotencyKey(req);
  const body = await readJson(req);
  const request = parseRefundRequest(body);
  await serveIdempotently(res, context.refundEndpoint, {
    key,
    fingerprint: fingerprintBody(body),
    perform: () => {
      const decision = decideRefund(request, context.charges, context.refunds, key, context.nowSeconds());
      if (decision.kind === 'refused') return decision.response;
      context.refunds.push(decision.refund);
      return { status: 201, body: decision.refund };
    },
  });
}

function webhookState(context: SandboxContext) {
  return { enabled: context.webhookDelivery.enabled, url: context.webhooks?.url ?? null };
}

async function sendEmail(context: SandboxContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const key = requireIdempotencyKey(req);
  const body = await readJson(req);
  const request = parseEmailRequest(body);
  await serveIdempotently(res, context.emailEndpoint, {
    key,
    fingerprint: fingerprintBody(body),
    perform: (): StoredResponse => {
      const email = buildEmail(request, key, context.nowSeconds());
      context.emails.push(email);
      return { status: 201, body: email };
    },
  });
}

/** Books a shipment: every request a new one, as the warehouse keeps no idempotency memory. */
async function bookShipment(context: SandboxContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const request = parseShipmentRequest(await readJson(req));
  await serveOnce(res, context.shipmentEndpoint, {
    arrive: () => context.bookingsInProgress.begin(request.reference),
    perform: () => {
      const shipment = buildShipment(request, context.nowSeconds());
      context.shipments.push(shipment);
      return { status: 201, body: shipment };
    },
  });
}

/**
 * The shipments booked for a reference, oldest first: how a client that lost an answer finds out what happened. While
 * a booking for the reference is still being made the answer is not known yet, and it says so (409, as the charge
 * lookup does for a key still in use) rather than listing what is booked so far. A booking still on its way (the
 * `in_transit` fault) has not arrived: the warehouse can't know of it.
 */
async function findShipments(context: SandboxContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const reference = new URL(req.url ?? '/', 'http://sandbox').searchParams.get('reference');
  if (!reference) throw invalidRequest('The reference query parameter is required.');
  if (context.bookingsInProgress.has(reference)) {
    throw new SandboxApiError(
      409,
      ErrorType.invalidRequest,
      'A booking for this reference is still being processed. Try again later.',
      'booking_in_progress',
    );
  }
  const data = context.shipments.filter((shipment) => shipment.reference === reference);
  sendJson(res, 200, { object: 'list', data });
}

async function addFault(context: SandboxContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  context.faults.add(parseFault(await readJson(req)));
  sendJson(res, 201, context.faults.list());
}

/**
 * Delivers a recorded event again, `times` times at once, each freshly signed and tried once: the tool for
 * testing a receiver against concurrent duplicates. Answers with what the receiver said to each.
 */
async function resendWebhook(context: SandboxContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const parsed = resendSchema.safeParse(await readJson(req));
  if (!parsed.success) throw invalidBody('resend', parsed.error);
  const { event_id: eventId, times } = parsed.data;
  const event = context.events.find((candidate) => candidate.id === eventId);
  if (!event) throw invalidRequest(`No such event: '${eventId}'.`, 404, 'resource_missing');
  const { webhooks } = context;
  if (!webhooks) throw invalidRequest('No webhook URL is configured on this sandbox.');
  const deliveries = await Promise.all(Array.from({ length: times }, () => webhooks.deliverOnce(event)));
  sendJson(res, 200, { event_id: event.id, deliveries });
}
