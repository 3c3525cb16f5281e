import { randomUUID } from 'node:crypto';
import type { Context, EventBridgeEvent, Handler } from 'aws-lambda';
import { DynamoDbStore, type EffectItem } from '../../src/dynamodb/store';
import {
  EffectKindError,
  InvalidKeyError,
  KeyReusedError,
  LeaseLostError,
  OperationInFlightError,
  StagingClosedError,
} from '../../src/engine/errors';
import { type MakeIdempotentOptions, makeIdempotent } from '../../src/engine/make-idempotent';
import type { IdempotencyHandle } from '../../src/engine/operation';
import { RecordStatus } from '../../src/engine/record';
import { lambdaContext } from '../support/api-event';
import { testDatabase } from '../support/dynamodb';
import { FakeClock } from '../support/fake-clock';
import { storeHarnesses } from '../support/stores';

const db = testDatabase();

const store = (clock?: FakeClock) =>
  new DynamoDbStore({ client: db.doc, tableName: db.idempotencyTable, leaseSeconds: 30, clock });

interface Order {
  readonly orderId: string;
  readonly amount: number;
}
const order = (amount = 4200): Order => ({ orderId: `ord_${randomUUID()}`, amount });

/** The effect each run stages: one row under the operation's downstream key, the witness for "it happened". */
const shipmentRow = (handle: IdempotencyHandle<EffectItem>, id: string): EffectItem => ({
  Put: { TableName: db.effectsTable, Item: { pk: `SHIP#${handle.downstreamKey}`, sk: id } },
});

interface Booked {
  readonly shipmentId: string;
  readonly amount?: number;
  readonly bookedAt?: Date;
}

/** A shipment booking whose behaviour a test can steer, counting its runs and the handles they saw. */
function booking(options: Partial<MakeIdempotentOptions<Order, EffectItem, Booked>> = {}) {
  const runs: IdempotencyHandle<EffectItem>[] = [];
  let behaviour = async (input: Order, handle: IdempotencyHandle<EffectItem>): Promise<Booked> => {
    const id = `shp_${randomUUID().slice(0, 8)}`;
    handle.stage(shipmentRow(handle, id));
    return { shipmentId: id, amount: input.amount, bookedAt: new Date(0) };
  };
  const book = makeIdempotent(
    async (input: Order, handle: IdempotencyHandle<EffectItem>) => {
      runs.push(handle);
      return behaviour(input, handle);
    },
    { store: store(), name: 'book-shipment', key: (input) => input.orderId, ...options },
  );
  return {
    book,
    runs,
    set(next: typeof behaviour) {
      behaviour = next;
    },
  };
}

const shipments = (handle: Pick<IdempotencyHandle<EffectItem>, 'downstreamKey'>) =>
  db.itemsUnder(`SHIP#${handle.downstreamKey}`);
const handleOf = (downstreamKey: string) => ({ downstreamKey });

describe('makeIdempotent', () => {
  it('runs the function once per key, and returns its stored result to every later call', async () => {
    const { book, runs } = booking();
    const input = order();
    const first = await book(input);
    expect(first).toMatchObject({ amount: 4200, bookedAt: new Date(0) });

    const again = await book(input);
    // A replay returns the stored JSON: a Date comes back as its ISO string.
    expect(again).toEqual({ ...first, bookedAt: '1970-01-01T00:00:00.000Z' });
    expect(runs).toHaveLength(1);
    expect(await shipments(runs[0]!)).toBe(1);
  });

  it('scopes the key taken from the input to the function’s name', async () => {
    const input = order();
    const shipping = booking();
    const billing = booking({ name: 'bill-order' });
    await shipping.book(input);
    await billing.book(input);
    expect(shipping.runs.map((handle) => handle.key)).toEqual([`book-shipment|book-shipment|${input.orderId}`]);
    expect(billing.runs.map((handle) => handle.key)).toEqual([`bill-order|bill-order|${input.orderId}`]);
  });

  it('keeps two scopes (tenants) apart under one name', async () => {
    const { book, runs } = booking({ scope: (input) => (input.amount > 100 ? 'tenant-a' : 'tenant-b') });
    const orderId = `ord_${randomUUID()}`;
    await book({ orderId, amount: 500 });
    await book({ orderId, amount: 50 });
    expect(runs.map((handle) => handle.key)).toEqual([
      `tenant-a|book-shipment|${orderId}`,
      `tenant-b|book-shipment|${orderId}`,
    ]);
  });

  it('releases the key when the function throws, writing none of its effects; the next call takes over', async () => {
    const { book, runs, set } = booking();
    const input = order();
    set(async (_input, handle) => {
      handle.stage(shipmentRow(handle, 'lost'));
      throw new Error('carrier unavailable');
    });
    await expect(book(input)).rejects.toThrow('carrier unavailable');
    expect(await shipments(runs[0]!)).toBe(0);

    set(async (_input, handle) => {
      handle.stage(shipmentRow(handle, 'booked'));
      return { shipmentId: 'booked' };
    });
    expect(await book(input)).toEqual({ shipmentId: 'booked' });
    // The same operation, taken over: the outside system sees the same downstream key again.
    expect(runs.map((handle) => handle.attempt)).toEqual([1, 2]);
    expect(runs[1]!.downstreamKey).toBe(runs[0]!.downstreamKey);
    expect(await shipments(runs[1]!)).toBe(1);
  });

  it('throws OperationInFlightError, with the record found, while another call holds the key', async () => {
    const { book, set } = booking();
    const input = order();
    let finish: (() => void) | undefined;
    set(async () => {
      await new Promise<void>((resolve) => {
        finish = resolve;
      });
      return { shipmentId: 'slow' };
    });
    const original = book(input);
    await waitFor(() => finish !== undefined);

    const duplicate = await book(input).catch((error: unknown) => error);
    expect(duplicate).toBeInstanceOf(OperationInFlightError);
    const { record, retryAfterMs } = duplicate as OperationInFlightError;
    expect(record).toMatchObject({ status: RecordStatus.InProgress, attempt: 1 });
    expect(retryAfterMs).toBeGreaterThan(0);

    finish?.();
    expect(await original).toEqual({ shipmentId: 'slow' });
    expect(await book(input)).toEqual({ shipmentId: 'slow' });
  });

  it('waits for the call in flight when asked to, and returns its result', async () => {
    const { book, runs, set } = booking({ waitMs: 10_000 });
    const input = order();
    set(async () => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      return { shipmentId: 'waited-for' };
    });
    const [first, second] = await Promise.all([book(input), book(input)]);
    expect(first).toEqual({ shipmentId: 'waited-for' });
    expect(second).toEqual({ shipmentId: 'waited-for' });
    expect(runs).toHaveLength(1);
  });

  it('throws KeyReusedError, with the record found, when the fingerprinted part of the input differs', async () => {
    const { book, runs } = booking({ fingerprint: (input) => ({ amount: input.amount }) });
    const input = order(4200);
    await book(input);
    const error = await book({ ...input, amount: 1 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KeyReusedError);
    expect((error as KeyReusedError).record).toMatchObject({ key: runs[0]!.key, status: RecordStatus.Completed });
    expect(runs).toHaveLength(1);
  });

  it('by default compares the whole input: the same key with another amount throws KeyReusedError', async () => {
    const { book, runs } = booking({ key: (input) => (input as Order & { invoiceId: string }).invoiceId });
    const invoiceId = `inv_${randomUUID()}`;
    const first = await book({ invoiceId, amount: 5 } as unknown as Order);
    const error = await book({ invoiceId, amount: 6 } as unknown as Order).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KeyReusedError);
    expect((error as KeyReusedError).record).toMatchObject({ key: runs[0]!.key, status: RecordStatus.Completed });
    // Canonical JSON: the same input in another member order is the same call, and replays.
    expect(await book({ amount: 5, invoiceId } as unknown as Order)).toEqual(JSON.parse(JSON.stringify(first)));
    expect(runs).toHaveLength(1);
  });

  it("with fingerprint: 'key-only' counts the key alone: the same key with other input replays the first", async () => {
    const { book, runs } = booking({ fingerprint: 'key-only' });
    const input = order(4200);
    const first = await book(input);
    expect(await book({ ...input, amount: 1 })).toEqual(JSON.parse(JSON.stringify(first)));
    expect(runs).toHaveLength(1);
  });

  it('refuses an input with no JSON form to fingerprint before touching the store, unless told key-only', async () => {
    const withBigInt = () => ({ ...order(), amount: 10n }) as unknown as Order;
    const compared = booking();
    db.requests.reset();
    await expect(compared.book(withBigInt())).rejects.toThrow(/no JSON form to fingerprint.*key-only/);
    expect(compared.runs).toHaveLength(0);
    expect(db.requests.sent).toEqual([]);
    const keyOnly = booking({ fingerprint: 'key-only' });
    keyOnly.set(async () => ({ shipmentId: 'by-key' }));
    expect(await keyOnly.book(withBigInt())).toEqual({ shipmentId: 'by-key' });
  });

  it('fences a call that outlived its lease: nothing of it is written, and the call that took over stands', async () => {
    const clock = new FakeClock(Date.now());
    const { book, runs, set } = booking({ store: store(clock) });
    const input = order();
    set(async (_input, handle) => {
      if (handle.attempt === 1) {
        // This call stalls past its lease; a retry takes the operation over and finishes it meanwhile.
        clock.advance(30_001);
        set(async (_again, next) => {
          next.stage(shipmentRow(next, 'by-the-retry'));
          return { shipmentId: 'by-the-retry' };
        });
        expect(await book(input)).toEqual({ shipmentId: 'by-the-retry' });
      }
      handle.stage(shipmentRow(handle, 'by-the-stale-call'));
      return { shipmentId: 'by-the-stale-call' };
    });

    const error = await book(input).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect((error as LeaseLostError).record).toMatchObject({ status: RecordStatus.Completed, attempt: 2 });
    expect(runs.map((handle) => handle.attempt)).toEqual([1, 2]);
    expect(await shipments(runs[0]!)).toBe(1);
    expect(await book(input)).toEqual({ shipmentId: 'by-the-retry' });
  });

  it("covers a Lambda function's remaining time with the lease, even when the store's lease is shorter", async () => {
    // The defect: a 1 s lease on a 2.5 s function let a second call take the operation over mid-run, and the effect
    // ran twice. With the function's context passed through, the claim's lease covers its remaining time.
    const clock = new FakeClock(Date.now());
    const warnings: Record<string, unknown>[] = [];
    const short = new DynamoDbStore({ client: db.doc, tableName: db.idempotencyTable, leaseSeconds: 1, clock });
    const carrier: string[] = [];
    const handler = makeIdempotent(
      async (input: Order, handle: IdempotencyHandle<EffectItem>, _context: Context) => {
        carrier.push(handle.downstreamKey);
        if (carrier.length === 1) {
          clock.advance(2000); // past the store's lease, inside the function's 2.5 s
          const duplicate = await handler(input, lambdaContext(2500)).catch((error: unknown) => error);
          expect(duplicate).toBeInstanceOf(OperationInFlightError);
        }
        handle.stage(shipmentRow(handle, `run-${carrier.length}`));
        return { shipmentId: `run-${carrier.length}` };
      },
      {
        store: short,
        name: 'book-shipment',
        key: (input) => input.orderId,
        logger: { warn: (_message, details) => warnings.push(details) },
      },
    );
    const input = order();
    const context = lambdaContext(2500);
    expect(await handler(input, context)).toEqual({ shipmentId: 'run-1' });
    expect(carrier).toHaveLength(1);
    // Said once, not per call: the store's lease is a misconfiguration for this function.
    expect(warnings).toEqual([{ storeLeaseMs: 1000, neededMs: expect.any(Number), marginMs: 1000 }]);
    expect(warnings[0]?.neededMs).toBeGreaterThan(2500);
    expect(await shipments(handleOf(carrier[0]!))).toBe(1);
  });

  it('refuses an effect staged after the function returned', async () => {
    const { book, runs, set } = booking();
    let late: IdempotencyHandle<EffectItem> | undefined;
    set(async (_input, handle) => {
      late = handle;
      return { shipmentId: 'early' };
    });
    await book(order());
    expect(() => late?.stage(shipmentRow(late, 'late'))).toThrow(StagingClosedError);
    expect(await shipments(runs[0]!)).toBe(0);
  });

  it('refuses an empty or too long key before touching the store', async () => {
    const { book, runs } = booking();
    db.requests.reset();
    await expect(book({ orderId: '', amount: 1 })).rejects.toBeInstanceOf(InvalidKeyError);
    await expect(book({ orderId: 'x'.repeat(256), amount: 1 })).rejects.toBeInstanceOf(InvalidKeyError);
    expect(runs).toHaveLength(0);
    expect(db.requests.sent).toEqual([]);
  });

  it('takes the key from a subset of the input: the same subset, in any member order, is the same call', async () => {
    const { book, runs } = booking({ key: (input) => ({ order: input.orderId, amount: input.amount }) });
    const input = order(4200);
    const first = await book(input);
    const again = await booking({ key: (input) => ({ amount: input.amount, order: input.orderId }) }).book(input);
    expect(await book(input)).toEqual(JSON.parse(JSON.stringify(first)));
    expect(runs).toHaveLength(1);
    // Hashed canonically into the key, so a second function with the members swapped names the same operation.
    expect(runs[0]!.key).toMatch(/\|book-shipment\|sha256:[0-9a-f]{64}$/);
    expect(again).toEqual(JSON.parse(JSON.stringify(first)));
    // Another subset is another operation.
    await book({ ...input, amount: 1 });
    expect(runs).toHaveLength(2);
  });

  it('refuses a subset that selects nothing, before touching the store', async () => {
    const { book, runs } = booking({ key: (input) => ({ missing: (input as { customer?: string }).customer }) });
    db.requests.reset();
    await expect(book(order())).rejects.toBeInstanceOf(InvalidKeyError);
    expect(runs).toHaveLength(0);
    expect(db.requests.sent).toEqual([]);
  });

  it('runs responseHook on every replay, never on the call that ran the function', async () => {
    const seen: { result: Booked; attempt: number }[] = [];
    const { book } = booking({
      responseHook: (result, record) => {
        seen.push({ result, attempt: record.attempt });
        return { ...result, replayed: true } as Booked;
      },
    });
    const input = order();
    const first = await book(input);
    expect(first).not.toHaveProperty('replayed');
    expect(await book(input)).toMatchObject({ shipmentId: first.shipmentId, replayed: true });
    expect(seen).toEqual([{ result: expect.objectContaining({ shipmentId: first.shipmentId }), attempt: 1 }]);
  });

  it('tracks a recoverable operation for recovery once its call gave up', async () => {
    const clock = new FakeClock(Date.now());
    const s = store(clock);
    const recoverable = booking({ store: s, recoverable: true });
    const plain = booking({ store: s, name: 'plain' });
    for (const { book, set } of [recoverable, plain]) {
      set(async () => {
        throw new Error('gave up');
      });
      await expect(book(order())).rejects.toThrow('gave up');
    }
    clock.advance(30_001);
    const due = (await s.findDue()).map((operation) => operation.key);
    expect(due).toContain(recoverable.runs[0]!.key);
    expect(due).not.toContain(plain.runs[0]!.key);
  });

  it('passes the arguments after the input through, so it can be exported as a Lambda handler', async () => {
    const contexts: Context[] = [];
    const handler: Handler<EventBridgeEvent<'OrderPlaced', Order>, { orderId: string }> = makeIdempotent(
      async (event: EventBridgeEvent<'OrderPlaced', Order>, _handle, context: Context) => {
        contexts.push(context);
        return { orderId: event.detail.orderId };
      },
      { store: store(), name: 'on-order-placed', key: (event) => event.detail.orderId },
    );
    const context = lambdaContext();
    const event = { detail: order(), 'detail-type': 'OrderPlaced' } as EventBridgeEvent<'OrderPlaced', Order>;
    const result = await handler(event, context, () => undefined);
    expect(result).toEqual({ orderId: event.detail.orderId });
    expect(contexts).toEqual([context]);
  });
});

describe.each(storeHarnesses)('makeIdempotent, with keys taken from JSON input, on %s', (_name, harness) => {
  const h = harness();

  /** A function counting the inputs it ran for, its key the input's `orderId`; each input is parsed from JSON. */
  function parsedBooking(options: Partial<MakeIdempotentOptions<Order, unknown, { ran: string }>> = {}) {
    const ran: string[] = [];
    const book = makeIdempotent(
      async (input: Order) => {
        ran.push(input.orderId);
        return { ran: input.orderId };
      },
      { store: h.store(), name: `book-${randomUUID().slice(0, 8)}`, key: (input) => input.orderId, ...options },
    );
    /** `json` is the event as it arrives: `\ud800` there is six ASCII characters, a lone surrogate once parsed. */
    return { ran, call: (json: string) => book(JSON.parse(json) as Order) };
  }

  it('refuses the other store’s effect at the staging line and releases the key: nothing written', async () => {
    const s = h.store();
    const orderId = `ord_${randomUUID()}`;
    // What the other store stages, as a JavaScript caller (or a cast) would hand it over.
    const foreign =
      h.name === 'DynamoDB'
        ? { text: 'INSERT INTO shipments (order_id) VALUES ($1)', values: [orderId] }
        : { Put: { TableName: 'shipments', Item: { pk: `ORDER#${orderId}`, sk: 'SHIPMENT' } } };
    const handles: IdempotencyHandle<unknown>[] = [];
    let stageForeign = true;
    let ranPastIt = false;
    const ship = makeIdempotent(
      async (input: { orderId: string }, idempotency) => {
        handles.push(idempotency);
        idempotency.stage(h.effect(input.orderId, 'shipment'));
        if (stageForeign) {
          idempotency.stage(foreign);
          ranPastIt = true;
        }
        return { shipped: input.orderId };
      },
      { store: s, name: `ship-${randomUUID().slice(0, 8)}`, key: (input) => input.orderId },
    );
    const error = await ship({ orderId }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EffectKindError);
    expect(error).toMatchObject({ index: 1, message: expect.stringContaining(`not a ${h.name}`) });
    expect(ranPastIt).toBe(false); // thrown by stage() itself, from the staging line

    expect(await h.rowsUnder(orderId)).toBe(0);
    expect(await h.stored(handles[0]!.key, s)).toMatchObject({ status: RecordStatus.Released });
    // Released, not stuck: the next call takes it over at once, under the same downstream key.
    stageForeign = false;
    expect(await ship({ orderId })).toEqual({ shipped: orderId });
    expect(handles.map((handle) => handle.attempt)).toEqual([1, 2]);
    expect(handles[1]!.downstreamKey).toBe(handles[0]!.downstreamKey);
    expect(await h.rowsUnder(orderId)).toBe(1);
  });

  it('never answers a key differing only in a lone surrogate with another key’s result: both are refused', async () => {
    const { ran, call } = parsedBooking();
    const results = [];
    for (const json of ['{"orderId":"ord-\\ud800","amount":1}', '{"orderId":"ord-\\ud801","amount":2}']) {
      results.push(await call(json).catch((error: unknown) => error));
    }
    expect(results).toEqual([expect.any(InvalidKeyError), expect.any(InvalidKeyError)]);
    expect(results[1]).toMatchObject({ reason: 'unstorable_characters', message: expect.stringContaining('U+D801') });
    expect(ran).toEqual([]);
  });

  it('runs a key holding U+FFFD, an ordinary character, after a lone-surrogate key was refused', async () => {
    const { ran, call } = parsedBooking();
    await expect(call('{"orderId":"ord-\\ud800","amount":1}')).rejects.toBeInstanceOf(InvalidKeyError);
    expect(await call('{"orderId":"ord-\\ufffd","amount":1}')).toEqual({ ran: 'ord-\ufffd' });
    expect(await call('{"orderId":"ord-\\ufffd","amount":1}')).toEqual({ ran: 'ord-\ufffd' });
    expect(ran).toEqual(['ord-\ufffd']);
  });

  it('refuses a key holding a NUL with InvalidKeyError, not a database error, on every attempt', async () => {
    const { ran, call } = parsedBooking();
    for (let attempt = 0; attempt < 2; attempt++) {
      await expect(call('{"orderId":"ord-\\u0000","amount":1}')).rejects.toMatchObject({
        name: 'InvalidKeyError',
        reason: 'unstorable_characters',
      });
    }
    expect(ran).toEqual([]);
  });

  it('refuses a scope (a tenant) holding a lone surrogate with InvalidKeyError, never a URIError', async () => {
    const { ran, call } = parsedBooking({ scope: () => 'tenant-\ud800' });
    await expect(call('{"orderId":"ord-1","amount":1}')).rejects.toBeInstanceOf(InvalidKeyError);
    expect(ran).toEqual([]);
  });

  it('keeps keys selected as a subset of the input apart, lone surrogates and all: they are hashed losslessly', async () => {
    const { ran, call } = parsedBooking({ key: (input) => [input.orderId] });
    await call('{"orderId":"ord-\\ud800","amount":1}');
    await call('{"orderId":"ord-\\ud801","amount":1}');
    expect(ran).toEqual(['ord-\ud800', 'ord-\ud801']);
  });
});

async function waitFor(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  if (!condition()) throw new Error('condition never held');
}
