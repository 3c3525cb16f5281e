import { randomUUID } from 'node:crypto';
import type { OpenAPIObject } from 'openapi3-ts/oas31';
import type { Order, OrderWithSteps } from '../../lib/orders/schema';
import type { Charge } from '../../lib/sandbox/charges';
import type { Email } from '../../lib/sandbox/emails';
import type { Shipment } from '../../lib/sandbox/shipments';
import { type E2eStack, e2eStack, FRONT_DOORS } from '../support/e2e-stack';
import { eventually } from '../support/eventually';
import { OpenApiContract } from '../support/openapi-contract';

/**
 * POST /orders end to end, on both stores (jest's two projects) and through both front doors: four recovery points
 * (reserve, charge, ship, notify) under faults in every outside system and in the function itself. The witnesses are
 * the systems' own records: the sandbox's charges, shipments and emails, and the database's reservations and order
 * rows. Every case ends with exactly one of each for the order, and a retry that replays the same 201.
 *
 * Two stacks: one with the environments' own timings, for the answers and 50 concurrent duplicates (whose
 * invocations share this machine's cores), and one whose lease runs out in seconds, for the crashes and the client
 * that never comes back. Its timings hold the shared rules: processor 1.5 s < functions 2.5 s, functions + 1 s
 * margin <= lease 4 s; completer every 1 s; TTL 120 s.
 */
jest.setTimeout(120_000);

const LEASE_MS = 4000;
const API_KEY = 'sk_test_orders';
const OTHER_KEY = 'sk_test_orders_other';
const ACCOUNT = 'acct_orders';
const API_KEYS = { [API_KEY]: ACCOUNT, [OTHER_KEY]: 'acct_orders_other' };
const main = e2eStack({
  name: 'orders',
  apiKeys: API_KEYS,
  // A booking can land up to 1.5 + 3 s after it was sent: "none" before then is no answer.
  settings: { PROCESSOR_TIMEOUT_MS: '1500', WAREHOUSE_TIMEOUT_MS: '1500', WAREHOUSE_PROCESSING_WINDOW_MS: '3000' },
});
const crashes = e2eStack({
  name: 'orders-crash',
  apiKeys: API_KEYS,
  settings: {
    IDEMPOTENCY_LEASE_SECONDS: String(LEASE_MS / 1000),
    IDEMPOTENCY_TTL_SECONDS: '120',
    API_FUNCTION_TIMEOUT_MS: '2500',
    CONSUMER_FUNCTION_TIMEOUT_MS: '2500',
    PROCESSOR_TIMEOUT_MS: '1500',
    WAREHOUSE_TIMEOUT_MS: '1500',
    WAREHOUSE_PROCESSING_WINDOW_MS: '9000',
    MAILER_TIMEOUT_MS: '1000',
    COMPLETER_INTERVAL_SECONDS: '1',
  },
});
/** The stack the running test uses: each describe block below picks one. */
let e2e: E2eStack = main;
let contract: OpenApiContract;
beforeAll(async () => {
  contract = new OpenApiContract((await (await fetch(`${main.url}/openapi.json`)).json()) as OpenAPIObject);
});
afterEach(async () => {
  await fetch(`${main.sandbox.url}/__faults`, { method: 'DELETE' });
  await fetch(`${crashes.sandbox.url}/__faults`, { method: 'DELETE' });
});

const widgets = {
  items: [{ sku: 'sku_widget', quantity: 2 }],
  amount: 4200,
  currency: 'usd',
  source: 'tok_visa',
  email: 'buyer@example.com',
};

async function order(key: string, options: { body?: unknown; url?: string; apiKey?: string } = {}) {
  const response = await fetch(`${options.url ?? e2e.url}/orders`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${options.apiKey ?? API_KEY}`,
      'Content-Type': 'application/json',
      'Idempotency-Key': key,
    },
    body: JSON.stringify(options.body ?? widgets),
  });
  // The REST API's answers are the documented ones; the HTTP API's own errors are not problem+json.
  if ((options.url ?? e2e.url) === e2e.url) await contract.check('POST /orders', response);
  return response;
}

/** What a client does with a 409 or a 5xx that says when to come back: wait as told, then ask again (bounded). */
async function orderUntilAnswered(key: string, options: Parameters<typeof order>[1] = {}, attempts = 30) {
  for (let attempt = 1; ; attempt++) {
    const response = await order(key, options).catch(() => undefined);
    const retryAfter = response?.headers.get('retry-after');
    if (response && (retryAfter === null || attempt === attempts)) return response;
    await new Promise((resolve) => setTimeout(resolve, Number(retryAfter ?? 1) * 1000));
  }
}

async function getOrder(id: string, apiKey = API_KEY) {
  const response = await fetch(`${e2e.url}/orders/${id}`, { headers: { Authorization: `Bearer ${apiKey}` } });
  await contract.check('GET /orders/{id}', response);
  return response;
}

async function stock(sku = 'sku_widget') {
  const response = await fetch(`${e2e.url}/inventory/${sku}`, { headers: { Authorization: `Bearer ${API_KEY}` } });
  await contract.check('GET /inventory/{sku}', response);
  expect(response.status).toBe(200);
  return (await response.json()) as { sku: string; available: number; reserved: number };
}

/** The charges made for one client key (through the order's reference in their metadata). */
function chargesForKey(clientKey: string): Charge[] {
  return e2e.sandbox.charges().filter((charge) => charge.metadata.operation_key?.endsWith(`|${clientKey}`));
}

/** Every witness of one order, from the systems' own records. */
async function witnesses(orderId: string) {
  return {
    charges: e2e.sandbox.charges().filter((charge) => charge.metadata.order_id === orderId),
    shipments: e2e.sandbox.shipments().filter((shipment: Shipment) => shipment.reference === orderId),
    emails: e2e.sandbox.emails().filter((email: Email) => email.metadata.order_id === orderId),
    reservations: await e2e.data.reservations(orderId),
    rows: (await e2e.data.orderIds(ACCOUNT)).filter((id) => id === orderId),
  };
}

/**
 * The end every case must reach: one reservation, one charge, one shipment, one email and one order row, the 201
 * naming exactly those, GET /orders/{id} showing every step completed, and a retry replaying the same 201.
 */
async function expectOrderedOnce(key: string, answer: Response, options: { url?: string } = {}): Promise<Order> {
  expect(answer.status).toBe(201);
  const created = (await answer.json()) as Order;
  expect(answer.headers.get('location')).toBe(`/orders/${created.id}`);
  const seen = await witnesses(created.id);
  expect(seen.charges.map((charge) => charge.id)).toEqual([created.charge_id]);
  expect(seen.shipments.map((shipment) => shipment.id)).toEqual([created.shipment_id]);
  expect(seen.emails.map((email) => email.id)).toEqual([created.email_id]);
  expect(seen.reservations).toEqual([expect.objectContaining({ state: 'held' })]);
  expect(seen.rows).toEqual([created.id]);
  expect(created).toMatchObject({
    status: 'confirmed',
    items: widgets.items,
    amount: widgets.amount,
    currency: widgets.currency,
  });
  expect(seen.charges[0]).toMatchObject({ amount: widgets.amount, metadata: { order_id: created.id } });
  expect(seen.emails[0]).toMatchObject({ to: widgets.email });

  const shown = (await (await getOrder(created.id)).json()) as OrderWithSteps;
  expect(shown).toEqual({
    ...created,
    steps: [
      { name: 'reserve', state: 'completed', ref: null },
      { name: 'charge', state: 'completed', ref: created.charge_id },
      { name: 'ship', state: 'completed', ref: created.shipment_id },
      { name: 'notify', state: 'completed', ref: created.email_id },
    ],
  });

  const replay = await order(key, options);
  expect(replay.status).toBe(201);
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
  expect(await replay.json()).toEqual(created);
  expect(await witnesses(created.id)).toEqual(seen);
  return created;
}

async function fault(body: Record<string, unknown>) {
  const response = await fetch(`${e2e.sandbox.url}/__faults`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(201);
}

async function faultsPending(): Promise<number> {
  return ((await (await fetch(`${e2e.sandbox.url}/__faults`)).json()) as unknown[]).length;
}

describe.each(FRONT_DOORS)('POST /orders through %s', (_door, urlOf) => {
  it('reserves, charges, ships and confirms once, and replays the same 201', async () => {
    const before = await stock();
    const key = randomUUID();
    await expectOrderedOnce(key, await order(key, { url: urlOf(e2e) }), { url: urlOf(e2e) });
    const after = await stock();
    expect(after.reserved - before.reserved).toBe(2);
    expect(before.available - after.available).toBe(2);
  });

  it('turns 50 concurrent duplicates into one order of each', async () => {
    const key = randomUUID();
    const responses = await Promise.all(Array.from({ length: 50 }, () => order(key, { url: urlOf(e2e) })));
    const statuses = responses.map((response) => response.status);
    expect(statuses.filter((status) => status !== 201 && status !== 409)).toEqual([]);
    const bodies = (await Promise.all(
      responses.filter((response) => response.status === 201).map((response) => response.json()),
    )) as Order[];
    expect(new Set(bodies.map((body) => body.id)).size).toBeLessThanOrEqual(1);
    await expectOrderedOnce(key, await orderUntilAnswered(key, { url: urlOf(e2e) }), { url: urlOf(e2e) });
  });

  it('answers a declined card with a stored 402, gives the reservation back, and shows what became of each step', async () => {
    const before = await stock();
    const ordersBefore = await e2e.data.orderIds(ACCOUNT);
    const key = randomUUID();
    const declined = await order(key, { url: urlOf(e2e), body: { ...widgets, source: 'tok_chargeDeclined' } });
    expect(declined.status).toBe(402);
    expect(await declined.json()).toMatchObject({ type: expect.stringMatching(/card-declined$/), status: 402 });
    const replay = await order(key, { url: urlOf(e2e), body: { ...widgets, source: 'tok_chargeDeclined' } });
    expect(replay.status).toBe(402);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await stock()).toEqual(before);
    expect(chargesForKey(key)).toEqual([]);

    // Before: `charge`, `ship` and `notify` pending for ever, for an order that had ended.
    const [orderId] = (await e2e.data.orderIds(ACCOUNT)).filter((id) => !ordersBefore.includes(id));
    // Ended early or not, an order is its own account's only.
    expect((await getOrder(orderId!, OTHER_KEY)).status).toBe(404);
    const shown = await getOrder(orderId!);
    expect(shown.status).toBe(200);
    expect(await shown.json()).toMatchObject({
      id: orderId,
      status: 'declined',
      charge_id: null,
      steps: [
        { name: 'reserve', state: 'released', ref: null },
        { name: 'charge', state: 'refused', ref: null },
        { name: 'ship', state: 'skipped', ref: null },
        { name: 'notify', state: 'skipped', ref: null },
      ],
    });
  });

  it('answers too little stock with a stored 409 of its own type, and reserves and charges nothing', async () => {
    const before = await stock('sku_gadget');
    const key = randomUUID();
    const body = { ...widgets, items: [{ sku: 'sku_gadget', quantity: before.available + 1 }] };
    const short = await order(key, { url: urlOf(e2e), body });
    expect(short.status).toBe(409);
    expect(await short.json()).toMatchObject({
      type: expect.stringMatching(/insufficient-stock$/),
      shortages: [{ sku: 'sku_gadget', requested: before.available + 1, available: before.available }],
    });
    const replay = await order(key, { url: urlOf(e2e), body });
    expect(replay.status).toBe(409);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await stock('sku_gadget')).toEqual(before);
    expect(chargesForKey(key)).toEqual([]);
  });
});

describe.each(FRONT_DOORS)('POST /orders under faults, through %s', (_door, urlOf) => {
  const at = () => ({ url: urlOf(e2e) });
  beforeAll(() => {
    e2e = crashes;
  });
  afterAll(() => {
    e2e = main;
  });

  it("books one shipment when the warehouse's reply is lost: the retry finds the booking by the order's id", async () => {
    const key = randomUUID();
    await fault({ mode: 'drop_after_charge', target: 'shipments' });
    const first = await order(key, at());
    expect(first.status).toBe(502);
    expect(await first.json()).toMatchObject({ type: expect.stringMatching(/warehouse-unavailable$/) });
    const [charge] = chargesForKey(key);
    expect(e2e.sandbox.shipments().filter((s) => s.reference === charge?.metadata.order_id)).toHaveLength(1);
    await expectOrderedOnce(key, await orderUntilAnswered(key, at()), at());
  });

  it('sends one confirmation when the mailer is down for a while: retries resume at the last step', async () => {
    const key = randomUUID();
    await fault({ mode: 'outage', ms: 3000, target: 'emails' });
    const first = await order(key, at());
    expect(first.status).toBe(503);
    expect(await first.json()).toMatchObject({ type: expect.stringMatching(/mailer-unavailable$/) });
    // The charge and the booking are done once, whatever the number of retries during the outage.
    await expectOrderedOnce(key, await orderUntilAnswered(key, at()), at());
  });

  it.each([
    ['after the charge', 'charges'],
    ['after the booking', 'shipments'],
  ])('completes once when the function is killed %s and the client retries', async (_when, target) => {
    const key = randomUUID();
    // The outside system does its work, then holds its answer: the function is killed while it waits.
    await fault({ mode: 'delay_after_charge', ms: 2000, target });
    const doomed = order(key, at()).catch((error: unknown) => error);
    await eventually(faultsPending, (pending) => pending === 0);
    await eventually(
      () => chargesForKey(key),
      (charges) => charges.length === 1,
    );
    if (target === 'shipments') {
      const orderId = chargesForKey(key)[0]!.metadata.order_id;
      await eventually(
        () => e2e.sandbox.shipments().filter((s) => s.reference === orderId),
        (booked) => booked.length === 1,
      );
    }
    await e2e.crash();
    expect(String(await doomed)).toMatch(/fetch failed/);
    await e2e.restart();
    await expectOrderedOnce(key, await orderUntilAnswered(key, at()), at());
  });

  it('completes an order whose client never comes back, every step once, and a late retry replays it', async () => {
    const key = randomUUID();
    // The booking's answer is lost and the client gives up: only the completer can finish the order.
    await fault({ mode: 'drop_after_charge', target: 'shipments' });
    expect((await order(key, at())).status).toBe(502);
    const orderId = chargesForKey(key)[0]!.metadata.order_id!;
    const confirmed = await eventually(
      async () => (await (await getOrder(orderId)).json()) as OrderWithSteps,
      (shown) => shown.status === 'confirmed',
      LEASE_MS * 6,
    );
    expect(confirmed.steps.every((step) => step.state === 'completed')).toBe(true);
    const late = await order(key, at());
    expect(late.headers.get('idempotent-replayed')).toBe('true');
    await expectOrderedOnce(key, late, at());
  });
});

describe('GET /orders/{id} and GET /inventory/{sku}', () => {
  it("shows an order to its own account only: anyone else's is a 404", async () => {
    const created = (await (await order(randomUUID())).json()) as Order;
    expect((await getOrder(created.id)).status).toBe(200);
    expect((await getOrder(created.id, OTHER_KEY)).status).toBe(404);
    expect((await getOrder('ord_000000000000000000000000')).status).toBe(404);
    expect((await getOrder('not-an-order')).status).toBe(404);
  });

  it('answers the seeded stock, and 404 for a SKU there is none of', async () => {
    for (const sku of ['sku_widget', 'sku_gadget']) {
      const { available, reserved } = await stock(sku);
      expect(available + reserved).toBeGreaterThanOrEqual(100_000);
    }
    const missing = await fetch(`${e2e.url}/inventory/sku_nothing`, {
      headers: { Authorization: `Bearer ${API_KEY}` },
    });
    await contract.check('GET /inventory/{sku}', missing);
    expect(missing.status).toBe(404);
  });

  it('refuses an order body that breaks the schema with a 400, before any key is claimed', async () => {
    const bad = await order(randomUUID(), { body: { ...widgets, items: [] } });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ type: expect.stringMatching(/invalid-body$/) });
  });
});

describe('POST /orders refuses at the door what an outside system would refuse later', () => {
  /** A 400 invalid-body naming `path`, and nothing moved: no order row, no charge, the stock as it was. */
  async function expectRefusedAtTheDoor(body: unknown, path: string, sku = 'sku_widget') {
    const before = await stock(sku);
    const ordersBefore = await e2e.data.orderIds(ACCOUNT);
    const key = randomUUID();
    const refused = await order(key, { body });
    expect(refused.status).toBe(400);
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await refused.json()).toMatchObject({
      type: expect.stringMatching(/invalid-body$/),
      status: 400,
      errors: [{ path, message: expect.any(String) }],
    });
    expect(chargesForKey(key)).toEqual([]);
    expect(await stock(sku)).toEqual(before);
    expect(await e2e.data.orderIds(ACCOUNT)).toEqual(ordersBefore);
  }

  it('refuses lines of one SKU that add up past the warehouse limit per line, before anything is charged', async () => {
    // Stock enough for the whole order: before, it was reserved and charged, then the warehouse refused the line (a
    // 400) and the order answered 502 "retry" for ever, the card charged and the stock held.
    const sku = `sku_bulk_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    await e2e.data.orders.seedStock(sku, 3_000_000);
    const items = [
      { sku, quantity: 600_000 },
      { sku, quantity: 600_000 },
    ];
    await expectRefusedAtTheDoor({ ...widgets, items }, 'items', sku);
  });

  it.each([
    ['a NUL', 'buyer\u0000@example.com'],
    ['a control character', 'buyer\u0007@example.com'],
    ['a lone surrogate', 'buyer\uD800@example.com'],
  ])(
    'refuses an email holding %s, the same on every store, before anything is reserved or charged',
    async (_c, email) => {
      // Before: 201 on DynamoDB, and on PostgreSQL a 500 "retry" on every retry (the step's result can't be kept as jsonb).
      await expectRefusedAtTheDoor({ ...widgets, email }, 'email');
    },
  );
});

describe('a warehouse that does not answer in time', () => {
  it('answers 504 (a timeout, not 502), and the retry after the booking landed finds it: one of each', async () => {
    const key = randomUUID();
    await fault({ mode: 'delay', ms: 3000, target: 'shipments' });
    const first = await order(key);
    // Before: 502, as the warehouse client never said its call had timed out.
    expect(first.status).toBe(504);
    expect(first.headers.get('retry-after')).not.toBeNull();
    expect(await first.json()).toMatchObject({ type: expect.stringMatching(/warehouse-unavailable$/), status: 504 });
    const orderId = chargesForKey(key)[0]!.metadata.order_id!;
    await eventually(
      () => e2e.sandbox.shipments().filter((shipment) => shipment.reference === orderId),
      (booked) => booked.length === 1,
    );
    await expectOrderedOnce(key, await orderUntilAnswered(key));
  });
});

describe('a booking still on its way when the order is retried (absence is never concluded while it may land)', () => {
  beforeEach(() => {
    e2e = main;
  });

  it('waits for a booking the warehouse has not seen yet: 503 until it can no longer land, then finds it', async () => {
    const key = randomUUID();
    await fault({ mode: 'in_transit', ms: 3000, target: 'shipments' });
    expect((await order(key)).status).toBeGreaterThanOrEqual(500);
    // The warehouse's lookup knows nothing of it yet: before, the retry took that for "never booked" and booked again.
    const retry = await order(key);
    expect(retry.status).toBe(503);
    expect(await retry.json()).toMatchObject({ type: expect.stringMatching(/warehouse-unavailable$/) });
    expect(Number(retry.headers.get('retry-after'))).toBeGreaterThanOrEqual(2);
    await expectOrderedOnce(key, await orderUntilAnswered(key));
  });

  it('waits for a booking the warehouse is still making: its lookup says so, and nothing is booked twice', async () => {
    const key = randomUUID();
    await fault({ mode: 'delay', ms: 3000, target: 'shipments' });
    expect((await order(key)).status).toBeGreaterThanOrEqual(500);
    const retry = await order(key);
    expect(retry.status).toBe(503);
    await expectOrderedOnce(key, await orderUntilAnswered(key));
  });

  it('is finished by the completer when the client never comes back, without booking it again', async () => {
    e2e = crashes;
    const key = randomUUID();
    // Still in transit when the completer first takes the order over (a lease after the first answer), landed long
    // before the next try, once a booking sent at the start can no longer land (1.5 + 9 s, and the margins).
    await fault({ mode: 'in_transit', ms: 9000, target: 'shipments' });
    const heldUntil = Date.now() + 9000;
    expect((await order(key)).status).toBeGreaterThanOrEqual(500);
    const orderId = chargesForKey(key)[0]!.metadata.order_id!;
    await eventually(
      async () => ((await (await getOrder(orderId)).json()) as OrderWithSteps).status,
      (status) => status === 'confirmed',
      40_000,
    );
    // The held booking lands at the end of its hold: only then does "one shipment" say anything.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, heldUntil + 1000 - Date.now())));
    await expectOrderedOnce(key, await order(key));
  });
});

describe.each(FRONT_DOORS)('an order the warehouse refuses after its charge, through %s', (_door, urlOf) => {
  beforeEach(() => {
    e2e = main;
  });

  /** The end of a refused order: one charge, refunded once; the stock back; a 422 stored; every step accounted for. */
  async function expectRefusedOnce(key: string, answer: Response, before: { available: number; reserved: number }) {
    expect(answer.status).toBe(422);
    expect(await answer.json()).toMatchObject({ type: expect.stringMatching(/shipment-refused$/), status: 422 });
    const [charge, ...more] = chargesForKey(key);
    expect(more).toEqual([]);
    const orderId = charge!.metadata.order_id!;
    const refunds = e2e.sandbox.refunds().filter((refund) => refund.charge === charge!.id);
    expect(refunds).toHaveLength(1);
    expect(refunds[0]).toMatchObject({ amount: widgets.amount });
    expect(await stock()).toMatchObject(before);
    const seen = await witnesses(orderId);
    expect(seen.shipments).toEqual([]);
    expect(seen.emails).toEqual([]);
    expect(seen.reservations).toEqual([expect.objectContaining({ state: 'released' })]);
    const shown = (await (await getOrder(orderId)).json()) as OrderWithSteps;
    expect(shown).toMatchObject({ status: 'refused', charge_id: charge!.id, shipment_id: null, email_id: null });
    expect(shown.steps).toEqual([
      { name: 'reserve', state: 'released', ref: null },
      { name: 'charge', state: 'refunded', ref: refunds[0]!.id },
      { name: 'ship', state: 'refused', ref: null },
      { name: 'notify', state: 'skipped', ref: null },
    ]);
    const replay = await order(key, { url: urlOf(e2e) });
    expect(replay.status).toBe(422);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(e2e.sandbox.refunds().filter((refund) => refund.charge === charge!.id)).toHaveLength(1);
  }

  it('refunds the charge, gives the stock back and stores a 422: it never retries for ever', async () => {
    const key = randomUUID();
    const before = await stock();
    await fault({ mode: 'refuse', target: 'shipments' });
    // Before: every non-2xx of the warehouse was "unavailable", a 502 "retry with the same key" for ever.
    await expectRefusedOnce(key, await order(key, { url: urlOf(e2e) }), before);
  });

  it('finishes a refund that failed the first time: the client is told to come back, then gets the 422', async () => {
    e2e = crashes;
    const key = randomUUID();
    const before = await stock();
    await fault({ mode: 'refuse', target: 'shipments' });
    await fault({ mode: 'error_503', target: 'refunds' });
    const first = await order(key, { url: urlOf(e2e) });
    expect(first.status).toBe(409);
    expect(Number(first.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    await expectRefusedOnce(key, await orderUntilAnswered(key, { url: urlOf(e2e) }), before);
  });
});

describe('an order refused after its charge whose client never comes back', () => {
  it('is compensated by the completer, the refund made once though it failed the first time', async () => {
    e2e = crashes;
    const key = randomUUID();
    const before = await stock();
    await fault({ mode: 'refuse', target: 'shipments' });
    await fault({ mode: 'error_503', target: 'refunds', count: 2 });
    expect((await order(key)).status).toBe(409);
    const orderId = chargesForKey(key)[0]!.metadata.order_id!;
    // Backed off a lease, then two: the completer's second and third tries.
    await eventually(
      async () => ((await (await getOrder(orderId)).json()) as OrderWithSteps).steps[0]!.state,
      (state) => state === 'released',
      40_000,
    );
    const answer = await order(key);
    expect(answer.headers.get('idempotent-replayed')).toBe('true');
    expect(answer.status).toBe(422);
    expect(e2e.sandbox.refunds().filter((refund) => refund.charge === chargesForKey(key)[0]!.id)).toHaveLength(1);
    expect(await stock()).toMatchObject(before);
  });
});
