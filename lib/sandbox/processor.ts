import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Charge } from './charges';
import type { Email } from './emails';
import type { ProcessorEvent } from './events';
import { FaultQueue, FaultTarget } from './faults';
import { IdempotencyLedger } from './idempotency-ledger';
import type { StoredResponse } from './idempotent-endpoint';
import type { Refund } from './refunds';
import { routeRequest, type SandboxContext, sandboxRoutes } from './routes';
import { BookingsInProgress, type Shipment } from './shipments';
import { DEFAULT_WEBHOOK_RETRY, type Delivery, type WebhookRetry, WebhookSender } from './webhook-sender';

export type { Charge } from './charges';
export type { Email } from './emails';
export type { ProcessorEvent } from './events';
export type { Refund } from './refunds';
export type { Shipment } from './shipments';
export type { Delivery, WebhookRetry } from './webhook-sender';
export { DEFAULT_WEBHOOK_RETRY, WEBHOOK_RETRY_WINDOW_ENV, webhookRetryFromEnv } from './webhook-sender';

/** The sandbox only ever listens on loopback: it accepts fault injection from anyone who can reach it. */
const HOST = '127.0.0.1';

export interface SandboxOptions {
  /** The port to listen on; 0 (the default) picks a free one. */
  readonly port?: number;
  /** Where `charge.succeeded` events are POSTed; without it events are only recorded. */
  readonly webhookUrl?: string;
  /** The key events are signed with; required with `webhookUrl`. */
  readonly webhookSecret?: string;
  /** Epoch milliseconds (like `Date.now`, the default): stamps `created` and webhook signatures. */
  readonly clock?: () => number;
  /**
   * How a new event's delivery is retried: backoff with jitter over a window of minutes by default (see
   * {@link DEFAULT_WEBHOOK_RETRY}; `webhookRetryFromEnv` reads the window from the environment). Closing the sandbox
   * cancels every pending retry.
   */
  readonly webhookRetry?: WebhookRetry;
  /**
   * Whether new events are delivered (default true). Off, events are still recorded (`GET /events`) but never sent,
   * as when an endpoint is disabled in a real processor's dashboard; `PUT /__webhooks` flips it at run time.
   */
  readonly webhooksEnabled?: boolean;
}

/** A running sandbox, with accessors that let a test see what it did. */
export interface Sandbox {
  /** `http://127.0.0.1:<port>`, without a trailing slash. */
  readonly url: string;
  readonly port: number;
  /** Stops listening, drops open connections, cancels injected delays and webhook retries. Safe to call twice. */
  close(): Promise<void>;
  /** Successful charges, in the order they were made (declines are not charges: no money moved). */
  charges(): Charge[];
  /** Refunds made, in order. */
  refunds(): Refund[];
  /** Events emitted, one per new successful charge. */
  events(): ProcessorEvent[];
  /** Emails sent. */
  emails(): Email[];
  /** Shipments booked by the warehouse, every booking (the warehouse dedupes nothing). */
  shipments(): Shipment[];
  /** Every webhook delivery attempt, retries and resends included. Empty when no webhook URL is set. */
  deliveries(): Delivery[];
}

/**
 * Starts a sandbox payment processor, mailer and warehouse: an in-memory stand-in for Stripe, an email provider and a
 * shipping API (which, like many, takes no idempotency key), with their idempotency behaviour, injectable faults and
 * signed webhooks.
 *
 * @example
 * const sandbox = await startSandbox({ webhookUrl: 'http://127.0.0.1:3000/webhooks', webhookSecret: 'whsec_test' });
 * await fetch(`${sandbox.url}/v1/charges`, {
 *   method: 'POST',
 *   headers: { 'Idempotency-Key': 'order-42', 'Content-Type': 'application/json' },
 *   body: JSON.stringify({ amount: 1000, currency: 'eur', source: 'tok_visa' }),
 * });
 * sandbox.charges(); // => [{ id: 'ch_…', idempotency_key: 'order-42', … }]
 * await sandbox.close();
 */
export async function startSandbox(options: SandboxOptions = {}): Promise<Sandbox> {
  const clock = options.clock ?? Date.now;
  const lifetime = new AbortController();
  const faults = new FaultQueue();
  const endpoint = (target: FaultTarget) => ({
    ledger: new IdempotencyLedger<StoredResponse>(),
    faults,
    target,
    signal: lifetime.signal,
  });
  const context: SandboxContext = {
    charges: [],
    refunds: [],
    emails: [],
    shipments: [],
    events: [],
    faults,
    chargeEndpoint: endpoint(FaultTarget.charges),
    refundEndpoint: endpoint(FaultTarget.refunds),
    emailEndpoint: endpoint(FaultTarget.emails),
    shipmentEndpoint: { faults, target: FaultTarget.shipments, signal: lifetime.signal },
    bookingsInProgress: new BookingsInProgress(),
    webhooks: webhookSender(options, clock, lifetime.signal),
    webhookDelivery: { enabled: options.webhooksEnabled ?? true },
    nowSeconds: () => Math.floor(clock() / 1000),
  };
  const server = createServer(routeRequest(sandboxRoutes(context)));
  const port = await listen(server, options.port ?? 0);
  let closing: Promise<void> | undefined;
  return {
    url: `http://${HOST}:${port}`,
    port,
    close: () => {
      closing ??= shutdown(server, lifetime, context.webhooks);
      return closing;
    },
    charges: () => [...context.charges],
    refunds: () => [...context.refunds],
    events: () => [...context.events],
    emails: () => [...context.emails],
    shipments: () => [...context.shipments],
    deliveries: () => context.webhooks?.deliveries() ?? [],
  };
}

function webhookSender(options: SandboxOptions, clock: () => number, signal: AbortSignal): WebhookSender | undefined {
  const { webhookUrl: url, webhookSecret: secret } = options;
  if (url === undefined) return undefined;
  if (!secret) throw new Error('startSandbox: webhookSecret is required when webhookUrl is set');
  // Fail at start, not silently at the first delivery.
  if (!URL.canParse(url)) throw new Error(`startSandbox: webhookUrl is not a valid URL: ${url}`);
  return new WebhookSender({ url, secret, clock, retry: options.webhookRetry ?? DEFAULT_WEBHOOK_RETRY, signal });
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, HOST, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/**
 * Aborting the lifetime cancels injected delays and webhook retries, which would otherwise run on (and keep the
 * process alive) after close. `server.close()` alone waits for every open connection, keep-alive ones included,
 * so they are dropped outright: nothing a sandbox holds is worth waiting for.
 */
async function shutdown(server: Server, lifetime: AbortController, webhooks: WebhookSender | undefined): Promise<void> {
  lifetime.abort();
  const closed = new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
  server.closeAllConnections();
  await Promise.all([closed, webhooks?.settle()]);
}
