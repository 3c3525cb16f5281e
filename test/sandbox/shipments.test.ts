import type { PendingFault } from '../../lib/sandbox/faults';
import { type Sandbox, type Shipment, startSandbox } from '../../lib/sandbox/processor';
import { WAREHOUSE_MAX_LINE_QUANTITY } from '../../lib/sandbox/shipments';
import { eventually, getJson, injectFault, newKey, postJson } from './client';

const items = [{ sku: 'sku_widget', quantity: 2 }];

describe('sandbox warehouse', () => {
  let sandbox: Sandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ clock: () => 1_700_000_000_000 });
  });
  afterEach(() => fetch(`${sandbox.url}/__faults`, { method: 'DELETE' }));
  afterAll(() => sandbox.close());

  const book = (reference: string, headers: Record<string, string> = {}, signal?: AbortSignal) =>
    postJson<Shipment>(`${sandbox.url}/v1/shipments`, { reference, items }, headers, signal);
  const bookedFor = async (reference: string) =>
    (await getJson<{ data: Shipment[] }>(`${sandbox.url}/v1/shipments?reference=${encodeURIComponent(reference)}`))
      .data;

  it('books a shipment and lists it under its reference and among every shipment', async () => {
    const reference = newKey('ord');
    const response = await book(reference);

    expect(response).toEqual({
      status: 201,
      replayed: false,
      body: {
        id: expect.stringMatching(/^shp_[0-9a-f]{24}$/),
        object: 'shipment',
        reference,
        items,
        status: 'booked',
        created: 1_700_000_000,
      },
    });
    expect(await bookedFor(reference)).toEqual([response.body]);
    expect(sandbox.shipments()).toContainEqual(response.body);
    expect(await getJson<Shipment[]>(`${sandbox.url}/shipments`)).toContainEqual(response.body);
  });

  it('books a new shipment on every call, whatever Idempotency-Key it is sent', async () => {
    const reference = newKey('ord');
    const first = await book(reference, { 'Idempotency-Key': 'same-key' });
    const second = await book(reference, { 'Idempotency-Key': 'same-key' });

    expect([first.status, second.status, second.replayed]).toEqual([201, 201, false]);
    expect(second.body.id).not.toBe(first.body.id);
    expect((await bookedFor(reference)).map((shipment) => shipment.id)).toEqual([first.body.id, second.body.id]);
  });

  it('answers an empty list for a reference nothing was booked for', async () => {
    expect(await bookedFor(newKey('nothing'))).toEqual([]);
  });

  it('refuses a lookup without a reference with a 400', async () => {
    const response = await fetch(`${sandbox.url}/v1/shipments`);
    expect(response.status).toBe(400);
  });

  it('refuses a line over its limit with a 400 that names the line and the limit, and books nothing', async () => {
    const reference = newKey('ord');
    const response = await postJson(`${sandbox.url}/v1/shipments`, {
      reference,
      items: [items[0], { sku: 'sku_gadget', quantity: WAREHOUSE_MAX_LINE_QUANTITY + 1 }],
    });
    expect(response).toEqual({
      status: 400,
      replayed: false,
      body: {
        error: {
          type: 'invalid_request_error',
          message: 'Invalid shipment: items.1.quantity: a line holds at most 1000000 units.',
          param: 'items.1.quantity',
        },
      },
    });
    expect(await bookedFor(reference)).toEqual([]);
    expect((await book(reference)).status).toBe(201); // the limit itself is a line it takes
  });

  it.each([
    ['no reference', { items }],
    ['no items', { reference: 'r', items: [] }],
    ['a zero quantity', { reference: 'r', items: [{ sku: 'sku_widget', quantity: 0 }] }],
    ['an unknown field', { reference: 'r', items, express: true }],
  ])('refuses a booking with %s with a 400 and books nothing', async (_case, body) => {
    const before = sandbox.shipments().length;
    const response = await postJson(`${sandbox.url}/v1/shipments`, body);
    expect(response).toMatchObject({ status: 400, body: { error: { type: 'invalid_request_error' } } });
    expect(sandbox.shipments()).toHaveLength(before);
  });

  describe('faults aimed at shipments', () => {
    it('error_503 books nothing', async () => {
      const reference = newKey('ord');
      await injectFault(sandbox, { mode: 'error_503', target: 'shipments' });

      expect((await book(reference)).status).toBe(503);
      expect(await bookedFor(reference)).toEqual([]);
    });

    it('drop_after_charge books the shipment, then hangs up without an answer', async () => {
      const reference = newKey('ord');
      await injectFault(sandbox, { mode: 'drop_after_charge', target: 'shipments' });

      await expect(book(reference)).rejects.toThrow();
      expect(await bookedFor(reference)).toHaveLength(1);
    });

    it('delay_after_charge books the shipment before the answer comes', async () => {
      const reference = newKey('ord');
      await injectFault(sandbox, { mode: 'delay_after_charge', ms: 2_000, target: 'shipments' });

      const answer = book(reference);
      await eventually(async () => expect(await bookedFor(reference)).toHaveLength(1));
      expect((await answer).status).toBe(201);
    });

    it('delay: the lookup answers 409 "in progress" while the booking is being made, then lists it', async () => {
      const reference = newKey('ord');
      const other = newKey('ord');
      await injectFault(sandbox, { mode: 'delay', ms: 600, target: 'shipments' });

      // The client gives up; the warehouse goes on booking, as a real one does.
      await expect(book(reference, {}, AbortSignal.timeout(100))).rejects.toThrow(/aborted/i);
      const during = await fetch(`${sandbox.url}/v1/shipments?reference=${encodeURIComponent(reference)}`);
      expect(during.status).toBe(409);
      expect(await during.json()).toEqual({
        error: {
          type: 'invalid_request_error',
          code: 'booking_in_progress',
          message: 'A booking for this reference is still being processed. Try again later.',
        },
      });
      expect(await bookedFor(other)).toEqual([]); // another reference is answered meanwhile
      await eventually(async () => expect(await bookedFor(reference)).toHaveLength(1));
    });

    it('in_transit: the warehouse knows nothing of a booking on its way, then books it though the client left', async () => {
      const reference = newKey('ord');
      await injectFault(sandbox, { mode: 'in_transit', ms: 600, target: 'shipments' });

      await expect(book(reference, {}, AbortSignal.timeout(100))).rejects.toThrow(/aborted/i);
      // Not "in progress": the request has not reached the warehouse, so its lookup finds nothing, honestly.
      expect(await bookedFor(reference)).toEqual([]);
      await eventually(async () => expect(await bookedFor(reference)).toHaveLength(1));
      expect(await getJson<PendingFault[]>(`${sandbox.url}/__faults`)).toEqual([]);
    });

    it('leaves the charges and emails alone', async () => {
      await injectFault(sandbox, { mode: 'error_503', target: 'shipments' });
      const email = await postJson(
        `${sandbox.url}/v1/emails`,
        { to: 'a@example.com', subject: 's', text: 't' },
        { 'Idempotency-Key': newKey() },
      );
      expect(email.status).toBe(201);
      expect(await getJson<PendingFault[]>(`${sandbox.url}/__faults`)).toHaveLength(1);
    });
  });
});
