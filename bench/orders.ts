import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { DynamoDbStore, type EffectItem } from 'keystone-idempotency/dynamodb';
import { type IdempotencyHandle, makeIdempotent, systemClock } from 'keystone-idempotency/engine';
import { type CreateOrderDeps, createOrder } from '../lib/orders/create-order';
import { DynamoDbOrders } from '../lib/orders/dynamodb';
import { OrderMailerClient } from '../lib/orders/mailer-client';
import { orderCreated, orderIdFor, pendingOrder } from '../lib/orders/order';
import type { OrderRequest } from '../lib/orders/schema';
import { WarehouseClient } from '../lib/orders/warehouse-client';
import { ProcessorClient } from '../lib/payments/processor-client';
import { startSandbox } from '../lib/sandbox/processor';
import { idempotencyTable, paymentsTable } from '../lib/tables/definitions';
import { ensureTable } from '../lib/tables/ensure';
import { type LatencySummary, now, summarize } from './measure';
import { meterRequests } from './request-meter';

/**
 * A 4-step order (reserve, charge, ship, notify) on DynamoDB Local and the sandbox, in process: the first request and
 * its replay, in DynamoDB requests and latency, for the order as recovery points (lib/orders/create-order.ts) beside
 * the same order written as one handler (the same four calls, every write held for the one commit, as before steps).
 *
 * What the steps cost is their checkpoints: one fenced write per step (two for the booking, whose "started" mark goes
 * first), where the one handler writes once at the end. What they buy is in the end-to-end tests, not here: a crash
 * after the charge or the booking resumes there, where the one handler would book a second shipment.
 */

export interface OrderBenchRow {
  readonly variant: 'steps' | 'one-handler';
  readonly path: 'first' | 'replay';
  /** DynamoDB requests per call (the median; every call of a path makes the same ones). */
  readonly requests: number;
  readonly latencyMs: LatencySummary;
}

export interface OrdersResult {
  readonly calls: number;
  readonly rows: readonly OrderBenchRow[];
  /** Every first request confirmed its order, with one charge, one shipment and one email per order. */
  readonly everyOrderOnce: boolean;
}

const REQUEST: OrderRequest = {
  items: [{ sku: 'sku_bench', quantity: 1 }],
  amount: 4200,
  currency: 'usd',
  source: 'tok_visa',
  email: 'buyer@example.com',
};

export async function measureOrders(options: { dynamoDbEndpoint: string; calls: number }): Promise<OrdersResult> {
  const sandbox = await startSandbox();
  const client = new DynamoDBClient({
    endpoint: options.dynamoDbEndpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  try {
    const suffix = randomUUID().slice(0, 8);
    const tables = { idempotency: `bench-orders-keys-${suffix}`, data: `bench-orders-data-${suffix}` };
    await ensureTable(client, idempotencyTable, tables.idempotency);
    await ensureTable(client, paymentsTable, tables.data);
    const doc = DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
    const orders = new DynamoDbOrders(doc, tables.data);
    await orders.seedStock('sku_bench', (options.calls + 20) * 4);
    const store = new DynamoDbStore({ client: doc, tableName: tables.idempotency });
    const deps: CreateOrderDeps<EffectItem> = {
      orders,
      processor: new ProcessorClient({ baseUrl: sandbox.url, timeoutMs: 5000 }),
      warehouse: new WarehouseClient({ baseUrl: sandbox.url, timeoutMs: 5000 }),
      mailer: new OrderMailerClient({ baseUrl: sandbox.url, timeoutMs: 5000 }),
      clock: systemClock,
    };
    const meter = meterRequests(client);
    const variants = {
      steps: idempotentOrder(store, 'orders-steps', (handle) =>
        createOrder(deps, { accountId: 'acct_bench', body: REQUEST, idempotency: handle }),
      ),
      'one-handler': idempotentOrder(store, 'orders-one-handler', (handle) => oneHandlerOrder(deps, handle)),
    } as const;

    // Unmeasured first, then the two variants call by call, so that neither gets a warmer process or a quieter moment.
    const names = Object.keys(variants) as OrderBenchRow['variant'][];
    const warmup = Math.min(20, options.calls);
    for (let index = 0; index < warmup; index++) {
      for (const name of names) await variants[name]({ key: randomUUID() });
    }
    const keys = Object.fromEntries(
      names.map((name) => [name, Array.from({ length: options.calls }, () => randomUUID())]),
    ) as Record<OrderBenchRow['variant'], string[]>;
    const rows: OrderBenchRow[] = [];
    let everyOrderOnce = true;
    for (const path of ['first', 'replay'] as const) {
      const latencies = Object.fromEntries(names.map((name) => [name, [] as number[]]));
      const requests = Object.fromEntries(names.map((name) => [name, [] as number[]]));
      for (let index = 0; index < options.calls; index++) {
        for (const name of names) {
          meter.reset();
          const started = now();
          const answer = await variants[name]({ key: keys[name][index]! });
          latencies[name]!.push(now() - started);
          requests[name]!.push(meter.requests.length);
          if (answer.statusCode !== 201) everyOrderOnce = false;
        }
      }
      for (const name of names) {
        rows.push({
          variant: name,
          path,
          requests: medianOf(requests[name]!),
          latencyMs: summarize(latencies[name]!),
        });
      }
    }
    const total = (options.calls + warmup) * names.length;
    const perOrder = new Map<string, number>();
    for (const shipment of sandbox.shipments()) {
      perOrder.set(shipment.reference, (perOrder.get(shipment.reference) ?? 0) + 1);
    }
    if (perOrder.size !== total || [...perOrder.values()].some((count) => count !== 1)) everyOrderOnce = false;
    if (sandbox.charges().length !== total || sandbox.emails().length !== total) {
      everyOrderOnce = false;
    }
    return { calls: options.calls, rows, everyOrderOnce };
  } finally {
    client.destroy();
    await sandbox.close();
  }
}

type Answer = Awaited<ReturnType<typeof createOrder>>;

function idempotentOrder(
  store: DynamoDbStore,
  name: string,
  work: (handle: IdempotencyHandle<EffectItem>) => Promise<Answer>,
): (input: { key: string }) => Promise<Answer> {
  return makeIdempotent((_input: { key: string }, handle) => work(handle), {
    store,
    name,
    key: (input) => input.key,
    recoverable: true,
  });
}

/**
 * The same order as one handler: the four calls in a row, under keys derived from the operation's downstream key,
 * and every local write held for the one commit. No checkpoint: a crash anywhere runs it all again from the top,
 * which books the shipment again (the warehouse takes no key) and is what the steps are for.
 */
async function oneHandlerOrder(deps: CreateOrderDeps<EffectItem>, handle: IdempotencyHandle<EffectItem>) {
  const orderId = orderIdFor(handle.downstreamKey);
  const shortages = await deps.orders.shortages(REQUEST.items);
  if (shortages.length > 0) throw new Error('the bench ran out of stock');
  const order = pendingOrder(orderId, REQUEST, new Date().toISOString());
  const charged = await deps.processor.charge(
    { amount: REQUEST.amount, currency: REQUEST.currency, source: REQUEST.source, metadata: { order_id: orderId } },
    `${handle.downstreamKey}:charge`,
  );
  if (charged.kind !== 'charged') throw new Error(`charge: ${charged.kind}`);
  const booked = await deps.warehouse.book(orderId, order.items);
  if (booked.kind !== 'booked') throw new Error('booking failed');
  const sent = await deps.mailer.send(
    { to: REQUEST.email, subject: `Order ${orderId}`, text: 'Thank you.', metadata: { order_id: orderId } },
    `${handle.downstreamKey}:notify`,
  );
  if (sent.kind !== 'sent') throw new Error(`email: ${sent.kind}`);
  const confirmed = {
    ...order,
    status: 'confirmed' as const,
    charge_id: charged.charge.id,
    shipment_id: booked.shipment.id,
    email_id: sent.id,
  };
  handle.stage(...deps.orders.reserve('acct_bench', confirmed, handle.key));
  return orderCreated(confirmed);
}

function medianOf(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}
