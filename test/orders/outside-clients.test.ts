import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { orderMailerClient, warehouseClient } from '../../lib/orders/config';
import { OrderMailerClient } from '../../lib/orders/mailer-client';
import { WarehouseClient } from '../../lib/orders/warehouse-client';
import { type Sandbox, startSandbox } from '../../lib/sandbox/processor';
import { DEFAULT_CALL_TIMEOUTS_MS, DEFAULT_WAREHOUSE_PROCESSING_WINDOW_MS } from '../../lib/timing/timing';
import { eventually, injectFault, newKey } from '../sandbox/client';

/**
 * The order's warehouse and mailer clients against the sandbox over real HTTP, and against a bare server for the
 * answers the sandbox never gives: which answers say "later" (unavailable, in progress) and which refuse for good.
 */
let sandbox: Sandbox;
let warehouse: WarehouseClient;
let mailer: OrderMailerClient;
beforeAll(async () => {
  sandbox = await startSandbox();
  warehouse = new WarehouseClient({ baseUrl: sandbox.url, timeoutMs: 500, processingWindowMs: 2_000 });
  mailer = new OrderMailerClient({ baseUrl: sandbox.url, timeoutMs: 500 });
});
afterEach(() => fetch(`${sandbox.url}/__faults`, { method: 'DELETE' }));
afterAll(() => sandbox.close());

const items = [{ sku: 'sku_widget', quantity: 2 }];
const email = { to: 'buyer@example.com', subject: 'Order', text: 'Thanks', metadata: { order_id: 'ord_1' } };

describe('WarehouseClient', () => {
  it('books, then finds the booking by its reference; a reference nothing was booked for is none', async () => {
    const reference = newKey('ord');
    const booked = await warehouse.book(reference, items);
    expect(booked).toEqual({ kind: 'booked', shipment: expect.objectContaining({ reference, items }) });
    expect(await warehouse.find(reference)).toEqual({
      kind: 'found',
      shipment: (booked as { shipment: unknown }).shipment,
    });
    expect(await warehouse.find(newKey('ord'))).toEqual({ kind: 'none' });
  });

  it('is refused, in the warehouse words, for a line over its limit: not unavailable, so no retry for ever', async () => {
    const reference = newKey('ord');
    expect(await warehouse.book(reference, [{ sku: 'sku_widget', quantity: 1_000_001 }])).toEqual({
      kind: 'refused',
      status: 400,
      message: 'Invalid shipment: items.0.quantity: a line holds at most 1000000 units.',
      param: 'items.0.quantity',
    });
    expect(sandbox.shipments().filter((shipment) => shipment.reference === reference)).toEqual([]);
  });

  it('times out with reason timeout (a 504 for the order, not a 502), and its lookup says in progress meanwhile', async () => {
    const reference = newKey('ord');
    await injectFault(sandbox, { mode: 'delay', ms: 1_000, target: 'shipments' });
    expect(await warehouse.book(reference, items)).toEqual({ kind: 'unavailable', reason: 'timeout' });
    expect(await warehouse.find(reference)).toEqual({ kind: 'in_progress' });
    await eventually(async () => expect((await warehouse.find(reference)).kind).toBe('found'));
  });

  it('is unavailable, never refused, when the warehouse is down or hangs up', async () => {
    await injectFault(sandbox, { mode: 'error_503', target: 'shipments' });
    expect(await warehouse.book(newKey('ord'), items)).toEqual({
      kind: 'unavailable',
      reason: 'overloaded',
      status: 503,
    });
    await injectFault(sandbox, { mode: 'drop_after_charge', target: 'shipments' });
    expect(await warehouse.book(newKey('ord'), items)).toEqual({ kind: 'unavailable', reason: 'network' });
  });

  it('says how long after a booking was sent it may still land: its timeout plus the processing window', () => {
    expect(warehouse.landsWithinMs).toBe(2_500);
    const configured = warehouseClient({ WAREHOUSE_URL: sandbox.url });
    expect(configured.landsWithinMs).toBe(DEFAULT_CALL_TIMEOUTS_MS.warehouse + DEFAULT_WAREHOUSE_PROCESSING_WINDOW_MS);
    const set = warehouseClient({
      WAREHOUSE_URL: sandbox.url,
      WAREHOUSE_TIMEOUT_MS: '1200',
      WAREHOUSE_PROCESSING_WINDOW_MS: '4000',
      // The processor's timeout no longer leaks into the warehouse's.
      PROCESSOR_TIMEOUT_MS: '9000',
    });
    expect(set.landsWithinMs).toBe(5_200);
  });
});

describe('OrderMailerClient', () => {
  it('sends under our key, and a retry with the key finds the email sent', async () => {
    const key = newKey();
    const sent = await mailer.send(email, key);
    expect(sent).toEqual({ kind: 'sent', id: expect.stringMatching(/^em_/) });
    expect(await mailer.send(email, key)).toEqual(sent);
  });

  it('is refused for good by a 4xx, with the mailer words: the order must not retry it for ever', async () => {
    const key = newKey();
    await mailer.send(email, key);
    expect(await mailer.send({ ...email, text: 'Another body' }, key)).toEqual({
      kind: 'refused',
      status: 400,
      message: 'Keys for idempotent requests can only be used with the same parameters they were first used with.',
    });
  });

  it('is unavailable when the mailer is down or slow (timeout: a 504 for the order)', async () => {
    await injectFault(sandbox, { mode: 'outage', ms: 60_000, target: 'emails' });
    expect(await mailer.send(email, newKey())).toEqual({ kind: 'unavailable', reason: 'overloaded', status: 503 });
    await fetch(`${sandbox.url}/__faults`, { method: 'DELETE' });
    await injectFault(sandbox, { mode: 'delay', ms: 1_000, target: 'emails' });
    expect(await mailer.send(email, newKey())).toEqual({ kind: 'unavailable', reason: 'timeout' });
  });

  it('takes its own timeout setting', async () => {
    await injectFault(sandbox, { mode: 'delay', ms: 700, target: 'emails' });
    const patient = orderMailerClient({ MAILER_URL: sandbox.url, MAILER_TIMEOUT_MS: '3000' });
    expect(await patient.send(email, newKey())).toMatchObject({ kind: 'sent' });
  });
});

describe('answers the sandbox never gives', () => {
  let server: Server;
  let answer: { status: number; body: string };
  let url: string;
  beforeAll(async () => {
    server = createServer((_req, res) => {
      res.writeHead(answer.status, { 'Content-Type': 'application/json', 'Retry-After': '3' });
      res.end(answer.body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    const closed = new Promise((resolve) => server.close(resolve));
    server.closeAllConnections();
    await closed;
  });

  const refusal = JSON.stringify({ error: { type: 'invalid_request_error', code: 'nope', message: 'Nope.' } });

  it.each([
    [408, { kind: 'unavailable', reason: 'timeout', status: 408, retryAfterSeconds: 3 }],
    [409, { kind: 'unavailable', reason: 'overloaded', status: 409, retryAfterSeconds: 3 }],
    [429, { kind: 'unavailable', reason: 'overloaded', status: 429, retryAfterSeconds: 3 }],
    [502, { kind: 'unavailable', reason: 'server_error', status: 502 }],
    [404, { kind: 'refused', status: 404, code: 'nope', message: 'Nope.' }],
    [422, { kind: 'refused', status: 422, code: 'nope', message: 'Nope.' }],
  ])('reads a %i the same from the warehouse and the mailer', async (status, outcome) => {
    answer = { status, body: refusal };
    const bare = {
      warehouse: new WarehouseClient({ baseUrl: url, timeoutMs: 500 }),
      mailer: new OrderMailerClient({ baseUrl: url, timeoutMs: 500 }),
    };
    expect(await bare.warehouse.book('ord_1', items)).toEqual(outcome);
    expect(await bare.mailer.send(email, newKey())).toEqual(outcome);
  });

  it('reads a lookup answered 409 as in progress, a 4xx as refused, and a body cut short as unavailable', async () => {
    const bare = new WarehouseClient({ baseUrl: url, timeoutMs: 500 });
    answer = { status: 409, body: refusal };
    expect(await bare.find('ord_1')).toEqual({ kind: 'in_progress', retryAfterSeconds: 3 });
    answer = { status: 400, body: 'not json' };
    expect(await bare.find('ord_1')).toEqual({ kind: 'refused', status: 400, message: 'the warehouse answered 400' });
    answer = { status: 200, body: '{"data": [' };
    expect(await bare.find('ord_1')).toEqual({ kind: 'unavailable', reason: 'server_error', status: 200 });
  });
});
