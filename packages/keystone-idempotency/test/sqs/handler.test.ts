import { randomUUID } from 'node:crypto';
import { FullBatchFailureError } from '@aws-lambda-powertools/batch';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import middy from '@middy/core';
import type { SQSBatchResponse, SQSRecord } from 'aws-lambda';
import { DynamoDbStore, type EffectItem } from '../../src/dynamodb/store';
import { ConfigurationError } from '../../src/engine/errors';
import {
  byBodyField,
  fromBody,
  makeSqsIdempotentHandler,
  recordIdentity,
  type SqsIdempotentHandlerOptions,
} from '../../src/sqs';
import { testDatabase } from '../support/dynamodb';
import { FakeClock } from '../support/fake-clock';
import { lambdaContext, recordingLogger, redelivered, resent, sqsEvent, sqsRecord } from './sqs-events';

const db = testDatabase();
const { doc } = db;

const LEASE_MS = 30_000;
const NAME = 'orders-fulfilment';

interface Order {
  readonly orderId: string;
  readonly qty?: number;
}
interface Shipped {
  readonly orderId: string;
  readonly bookingId: string;
}

/** A carrier that, like any well-behaved outside API, dedupes bookings by the idempotency key it is given. */
class FakeCarrier {
  readonly calls: string[] = [];
  readonly bookings = new Map<string, string>();
  book(idempotencyKey: string): string {
    this.calls.push(idempotencyKey);
    const existing = this.bookings.get(idempotencyKey);
    if (existing) return existing;
    const bookingId = `bk_${this.bookings.size + 1}`;
    this.bookings.set(idempotencyKey, bookingId);
    return bookingId;
  }
}

/**
 * A consumer that books a shipment outside, then stages one row per committed run: the rows count the runs whose
 * effects committed. `failNext` makes the next run of an order throw after the outside call (a crash mid-work).
 */
function consumer(
  options: Partial<SqsIdempotentHandlerOptions<Shipped, EffectItem>> = {},
  clock = new FakeClock(Date.now()),
  /** The invocation's time, which each claim's lease covers. */
  timeoutMs = LEASE_MS - 5000,
) {
  const store = new DynamoDbStore({
    client: doc,
    tableName: db.idempotencyTable,
    clock,
    leaseSeconds: LEASE_MS / 1000,
  });
  const carrier = new FakeCarrier();
  const failNext = new Set<string>();
  const runs: string[] = [];
  const logger = recordingLogger();
  const handler = makeSqsIdempotentHandler<Shipped, EffectItem>({
    store,
    name: NAME,
    key: byBodyField('orderId'),
    logger,
    process: async (record, ctx) => {
      const order = JSON.parse(record.body) as Order;
      runs.push(order.orderId);
      const bookingId = carrier.book(ctx.downstreamKey);
      if (failNext.delete(order.orderId)) throw new Error(`carrier timed out for ${order.orderId}`);
      ctx.stage({
        Put: {
          TableName: db.effectsTable,
          Item: { pk: `ORDER#${order.orderId}`, sk: `SHIPPED#${randomUUID()}`, bookingId },
        },
      });
      return { orderId: order.orderId, bookingId };
    },
    ...options,
  });
  /**
   * What the queue sees: the records to redeliver. A handler that throws (Powertools' FullBatchFailureError, when
   * every record failed) sends every record back, which is what this reports for it.
   */
  const invoke = async (...records: SQSRecord[]): Promise<SQSBatchResponse> => {
    try {
      return await handler(sqsEvent(...records), lambdaContext(timeoutMs));
    } catch (error) {
      if (!(error instanceof FullBatchFailureError)) throw error;
      return { batchItemFailures: failures(...records) };
    }
  };
  return { store, carrier, failNext, runs, logger, handler, invoke };
}

const order = (extra: Partial<Order> & { groupId?: string } = {}) => {
  const { groupId, ...body } = extra;
  return sqsRecord({ body: { orderId: randomUUID(), ...body }, ...(groupId ? { groupId } : {}) });
};
const orderIdOf = (record: SQSRecord) => (JSON.parse(record.body) as Order).orderId;
const failures = (...records: SQSRecord[]) => records.map((record) => ({ itemIdentifier: record.messageId }));

async function committedRuns(record: SQSRecord): Promise<number> {
  const { Items } = await doc.send(
    new ScanCommand({
      TableName: db.effectsTable,
      FilterExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': `ORDER#${orderIdOf(record)}` },
    }),
  );
  return Items?.length ?? 0;
}

describe('makeSqsIdempotentHandler', () => {
  it('runs a message that appears twice in one batch once, and acknowledges both', async () => {
    const { invoke, runs } = consumer();
    const message = order();
    expect(await invoke(message, redelivered(message))).toEqual({ batchItemFailures: [] });
    expect(runs).toEqual([orderIdOf(message)]);
    expect(await committedRuns(message)).toBe(1);
  });

  it('acknowledges a redelivered message without running it', async () => {
    const { invoke, runs } = consumer();
    const message = order();
    await invoke(message);
    expect(await invoke(redelivered(message))).toEqual({ batchItemFailures: [] });
    expect(runs).toHaveLength(1);
    expect(await committedRuns(message)).toBe(1);
  });

  it('runs a re-sent message (new message id, same business key) once', async () => {
    const { invoke, runs } = consumer();
    const message = order();
    const again = resent(message);
    expect(again.messageId).not.toBe(message.messageId);
    await invoke(message);
    expect(await invoke(again)).toEqual({ batchItemFailures: [] });
    expect(runs).toHaveLength(1);
    expect(await committedRuns(message)).toBe(1);
  });

  it('runs a re-sent message again when keyed by message id, which is why a business key is better', async () => {
    const { invoke, runs } = consumer({ key: undefined });
    const message = order();
    await invoke(message);
    await invoke(resent(message));
    expect(runs).toHaveLength(2);
  });

  it('reports a throwing record in batchItemFailures, commits the others, and retries it under the same key', async () => {
    const { invoke, runs, failNext, carrier, logger, store } = consumer();
    const [first, flaky, last] = [order(), order(), order()];
    failNext.add(orderIdOf(flaky));

    expect(await invoke(first, flaky, last)).toEqual({ batchItemFailures: failures(flaky) });
    expect(await committedRuns(first)).toBe(1);
    expect(await committedRuns(flaky)).toBe(0);
    expect(await committedRuns(last)).toBe(1);
    expect(logger.lines).toEqual([{ level: 'error', message: 'record failed; sent back to the queue' }]);

    expect(await invoke(redelivered(flaky))).toEqual({ batchItemFailures: [] });
    expect(runs.filter((id) => id === orderIdOf(flaky))).toHaveLength(2);
    expect(await committedRuns(flaky)).toBe(1);
    // Both attempts reached the carrier under the record's one downstream key, so the carrier booked it once.
    const { downstreamKey } = (await store.get(
      recordIdentity(flaky, { name: NAME, key: byBodyField('orderId') }).key,
    ))!;
    expect(carrier.calls.filter((key) => key === downstreamKey)).toHaveLength(2);
    expect(carrier.bookings.size).toBe(3);
  });

  it('retries a crash after the outside call under the same downstream key, so the outside effect happens once', async () => {
    const { invoke, failNext, carrier } = consumer();
    const message = order();
    failNext.add(orderIdOf(message));
    await invoke(message);
    await invoke(redelivered(message));
    expect(carrier.calls).toHaveLength(2);
    expect(carrier.calls[1]).toBe(carrier.calls[0]);
    expect(carrier.bookings.size).toBe(1);
  });

  it('takes over from a consumer that died mid-work once its lease runs out, under the same downstream key', async () => {
    const clock = new FakeClock(Date.now());
    const { invoke, store, carrier, runs } = consumer({}, clock);
    const message = order();
    // The dead consumer claimed the key and called the carrier, then vanished without releasing anything.
    const identity = recordIdentity(message, { name: NAME, key: byBodyField('orderId') });
    const dead = await store.claim(identity.key, identity.fingerprint);
    if (dead.kind !== 'acquired') throw new Error('expected to acquire');
    carrier.book(dead.lease.downstreamKey);

    expect(await invoke(redelivered(message))).toEqual({ batchItemFailures: failures(message) }); // still its lease
    expect(runs).toEqual([]);
    clock.advance(LEASE_MS + 1);
    expect(await invoke(redelivered(message))).toEqual({ batchItemFailures: [] });
    expect(carrier.calls).toEqual([dead.lease.downstreamKey, dead.lease.downstreamKey]);
    expect(carrier.bookings.size).toBe(1);
    expect(await committedRuns(message)).toBe(1);
  });

  it('reports an in-flight duplicate as a failure without running it, and replays once the original commits', async () => {
    const { invoke, store, runs, logger } = consumer();
    const message = order();
    const identity = recordIdentity(message, { name: NAME, key: byBodyField('orderId') });
    const original = await store.claim(identity.key, identity.fingerprint);
    if (original.kind !== 'acquired') throw new Error('expected to acquire');

    expect(await invoke(redelivered(message))).toEqual({ batchItemFailures: failures(message) });
    expect(runs).toEqual([]);
    expect(logger.lines).toEqual([
      { level: 'warn', message: 'record in flight elsewhere; it comes back when its lease has run out' },
    ]);

    await store.commit(original.lease, { statusCode: 200, body: '{"orderId":"x","bookingId":"bk_0"}', headers: {} });
    expect(await invoke(redelivered(message))).toEqual({ batchItemFailures: [] });
    expect(runs).toEqual([]);
  });

  it('waits for an in-flight original when asked, and acknowledges its result', async () => {
    const { invoke, store, runs } = consumer({ inFlightWaitMs: 3000 });
    const message = order();
    const identity = recordIdentity(message, { name: NAME, key: byBodyField('orderId') });
    const original = await store.claim(identity.key, identity.fingerprint);
    if (original.kind !== 'acquired') throw new Error('expected to acquire');
    setTimeout(() => void store.commit(original.lease, { statusCode: 200, body: 'null', headers: {} }), 150);
    expect(await invoke(redelivered(message))).toEqual({ batchItemFailures: [] });
    expect(runs).toEqual([]);
  });

  it('writes none of the staged effects when the commit is fenced by a takeover, and sends the record back', async () => {
    const clock = new FakeClock(Date.now());
    const taker = new DynamoDbStore({
      client: doc,
      tableName: db.idempotencyTable,
      clock,
      leaseSeconds: LEASE_MS / 1000,
    });
    let takeover: string | undefined;
    const { invoke, logger } = consumer(
      {
        process: async (_record, ctx) => {
          ctx.stage({ Put: { TableName: db.effectsTable, Item: { pk: ctx.key, sk: 'STALE' } } });
          // This consumer stalls past its lease, and another one takes the key over meanwhile.
          clock.advance(LEASE_MS + 1);
          takeover = (await taker.claim(ctx.key, ctx.lease.fingerprint)).kind;
          return { orderId: 'stale', bookingId: 'stale' };
        },
      },
      clock,
      // Less time than the lease: only a stalled or skewed clock lets this invocation outlive its lease.
      LEASE_MS - 2000,
    );
    const message = order();
    expect(await invoke(message)).toEqual({ batchItemFailures: failures(message) });
    expect(takeover).toBe('acquired');
    const { Items } = await doc.send(
      new ScanCommand({
        TableName: db.effectsTable,
        FilterExpression: 'sk = :sk',
        ExpressionAttributeValues: { ':sk': 'STALE' },
      }),
    );
    expect(Items).toEqual([]);
    expect(logger.lines).toEqual([
      { level: 'warn', message: 'lease taken over before the commit; nothing written, sent back' },
    ]);
  });

  it('fails a record without a usable key and goes on with the others', async () => {
    const { invoke, runs, logger } = consumer();
    const keyless = sqsRecord({ body: { note: 'no order id' } });
    const fine = order();
    expect(await invoke(keyless, fine)).toEqual({ batchItemFailures: failures(keyless) });
    expect(runs).toEqual([orderIdOf(fine)]);
    expect(logger.lines).toEqual([
      { level: 'error', message: 'record could not be processed; sent back to the queue' },
    ]);
  });

  describe('a record sent longer ago than the store’s TTL', () => {
    /** A consumer whose store forgets keys after a minute, logging every detail it is told. */
    function forgetfulConsumer(clock: FakeClock) {
      const store = new DynamoDbStore({
        client: doc,
        tableName: db.idempotencyTable,
        clock,
        leaseSeconds: LEASE_MS / 1000,
        ttlSeconds: 60,
      });
      const warnings: { message: string; details: Record<string, unknown> }[] = [];
      const runs: string[] = [];
      const handler = makeSqsIdempotentHandler({
        store,
        name: NAME,
        key: byBodyField('orderId'),
        clock,
        logger: { warn: (message, details) => void warnings.push({ message, details }), error: () => undefined },
        process: async (record) => {
          runs.push(orderIdOf(record));
          return null;
        },
      });
      const invoke = (record: SQSRecord) => handler(sqsEvent(record), lambdaContext(LEASE_MS - 5000));
      return { invoke, runs, warnings };
    }

    it('runs, never dropped or failed, with a loud warning that its key may have expired and it may run again', async () => {
      const message = order();
      const clock = new FakeClock(Number(message.attributes.SentTimestamp)); // the clock reads the very ms it was sent
      const { invoke, runs, warnings } = forgetfulConsumer(clock);
      expect(await invoke(message)).toEqual({ batchItemFailures: [] });
      expect(warnings).toEqual([]); // sent just now: well within the TTL
      clock.advance(30_000);
      expect(await invoke(redelivered(message))).toEqual({ batchItemFailures: [] }); // a replay, within the TTL
      expect(warnings).toEqual([]);
      // Past the TTL (the record's expiry is in whole seconds, rounded up): its key expired; SQS delivers it again (a
      // lost delete, a redrive from the DLQ).
      clock.advance(32_000);
      expect(await invoke(redelivered(message))).toEqual({ batchItemFailures: [] });
      expect(runs).toEqual([orderIdOf(message), orderIdOf(message)]); // the second run this warning is about
      expect(warnings).toEqual([
        {
          message: expect.stringContaining('record older than the idempotency TTL: its key may have expired'),
          details: expect.objectContaining({ messageId: message.messageId, ageSeconds: 62, ttlSeconds: 60 }),
        },
      ]);
    });
  });

  describe('bodies', () => {
    it('acknowledges a re-sent event with a re-rendered body as a replay by default', async () => {
      const { invoke, runs } = consumer();
      const message = order({ qty: 1 });
      await invoke(message);
      const rerendered = { ...resent(message), body: JSON.stringify({ orderId: orderIdOf(message), qty: 2 }) };
      expect(await invoke(rerendered)).toEqual({ batchItemFailures: [] });
      expect(runs).toHaveLength(1);
    });

    it('sends a mismatch back to the queue (towards the DLQ) when bodies are fingerprinted', async () => {
      const { invoke, runs, logger } = consumer({ fingerprintBody: true });
      const message = order({ qty: 1 });
      await invoke(message);
      const sameJson = { ...resent(message), body: `{ "qty": 1, "orderId": "${orderIdOf(message)}" }` };
      expect(await invoke(sameJson)).toEqual({ batchItemFailures: [] });
      const changed = { ...resent(message), body: JSON.stringify({ orderId: orderIdOf(message), qty: 2 }) };
      expect(await invoke(changed, order())).toEqual({ batchItemFailures: failures(changed) });
      expect(runs).toHaveLength(2);
      expect(logger.lines).toEqual([{ level: 'error', message: 'key reused with a different body' }]);
    });

    it('compares only the part of the body `fingerprint` selects', async () => {
      const { invoke, runs } = consumer({ fingerprint: fromBody((order: Order & { sentAt?: string }) => order.qty) });
      const message = order({ qty: 1 });
      await invoke(message);
      const rerendered = {
        ...resent(message),
        body: JSON.stringify({ orderId: orderIdOf(message), qty: 1, sentAt: new Date().toISOString() }),
      };
      expect(await invoke(rerendered)).toEqual({ batchItemFailures: [] });
      expect(runs).toHaveLength(1);
      const changed = { ...resent(message), body: JSON.stringify({ orderId: orderIdOf(message), qty: 2 }) };
      expect(await invoke(changed)).toEqual({ batchItemFailures: failures(changed) });
      expect(runs).toHaveLength(1);
    });

    it('takes the key from a subset of the body, whatever the order of its members', async () => {
      const { invoke, runs } = consumer({ key: fromBody((order: Order) => ({ id: order.orderId, qty: order.qty })) });
      const message = order({ qty: 3 });
      await invoke(message);
      const reordered = { ...resent(message), body: `{"qty":3,"orderId":"${orderIdOf(message)}"}` };
      expect(await invoke(reordered)).toEqual({ batchItemFailures: [] });
      expect(runs).toHaveLength(1);
      // Another subset is another message.
      await invoke({ ...resent(message), body: JSON.stringify({ orderId: orderIdOf(message), qty: 4 }) });
      expect(runs).toHaveLength(2);
    });

    it('fails a record whose body the key cannot be selected from', async () => {
      const { invoke, runs } = consumer({ key: fromBody((order: Order) => order.orderId) });
      const garbled = { ...order(), body: '{"orderId":' };
      expect(await invoke(garbled, order())).toEqual({ batchItemFailures: failures(garbled) });
      expect(runs).toHaveLength(1);
    });

    it('refuses fingerprint together with fingerprintBody', () => {
      expect(() => consumer({ fingerprintBody: true, fingerprint: fromBody((order: Order) => order.qty) })).toThrow(
        ConfigurationError,
      );
    });

    it('logs and acknowledges a mismatch when told to', async () => {
      const { invoke, logger } = consumer({ fingerprintBody: true, onMismatch: 'acknowledge' });
      const message = order({ qty: 1 });
      await invoke(message);
      const changed = { ...resent(message), body: JSON.stringify({ orderId: orderIdOf(message), qty: 2 }) };
      expect(await invoke(changed)).toEqual({ batchItemFailures: [] });
      expect(logger.lines).toEqual([{ level: 'error', message: 'key reused with a different body' }]);
    });
  });

  describe('FIFO queues', () => {
    it('after a failure in a group, fails that group’s later records without running them; other groups go on', async () => {
      const { invoke, runs, failNext } = consumer();
      const a1 = order({ groupId: 'A' });
      const b1 = order({ groupId: 'B' });
      const a2 = order({ groupId: 'A' });
      const b2 = order({ groupId: 'B' });
      const a3 = order({ groupId: 'A' });
      failNext.add(orderIdOf(a2));

      expect(await invoke(a1, b1, a2, b2, a3)).toEqual({ batchItemFailures: failures(a2, a3) });
      expect(runs).toEqual([a1, b1, a2, b2].map(orderIdOf));
      expect(await committedRuns(a3)).toBe(0);

      // The redelivery, in order: a2 runs again (and commits), a3 runs for the first time.
      expect(await invoke(redelivered(a2), redelivered(a3))).toEqual({ batchItemFailures: [] });
      expect(runs.slice(4)).toEqual([a2, a3].map(orderIdOf));
    });

    it('holds a group back behind an in-flight record', async () => {
      const { invoke, store, runs } = consumer();
      const a1 = order({ groupId: 'A' });
      const a2 = order({ groupId: 'A' });
      const b1 = order({ groupId: 'B' });
      const identity = recordIdentity(a1, { name: NAME, key: byBodyField('orderId') });
      await store.claim(identity.key, identity.fingerprint);
      expect(await invoke(a1, a2, b1)).toEqual({ batchItemFailures: failures(a1, a2) });
      expect(runs).toEqual([orderIdOf(b1)]);
    });
  });

  describe('when every record fails', () => {
    it('throws FullBatchFailureError by default, so Lambda retries the batch and backs off', async () => {
      const { handler, failNext } = consumer();
      const message = order();
      failNext.add(orderIdOf(message));
      await expect(handler(sqsEvent(message), lambdaContext())).rejects.toBeInstanceOf(FullBatchFailureError);
    });

    it('returns every record as a failure with throwOnFullBatchFailure: false', async () => {
      const { handler, failNext } = consumer({ throwOnFullBatchFailure: false });
      const message = order();
      failNext.add(orderIdOf(message));
      expect(await handler(sqsEvent(message), lambdaContext())).toEqual({ batchItemFailures: failures(message) });
    });
  });

  it('works as a middy handler', async () => {
    const { handler, runs } = consumer();
    const wrapped = middy(handler);
    const message = order();
    expect(await wrapped(sqsEvent(message, redelivered(message)), lambdaContext())).toEqual({ batchItemFailures: [] });
    expect(runs).toHaveLength(1);
  });

  it('keeps two consumers of one message apart', async () => {
    const shipping = consumer();
    const billing = consumer({ name: 'billing' });
    const message = order();
    await shipping.invoke(message);
    await billing.invoke(message);
    expect([shipping.runs, billing.runs].map((runs) => runs.length)).toEqual([1, 1]);
  });

  it('refuses a consumer without a name', () => {
    expect(() => consumer({ name: '' })).toThrow('needs a name');
  });
});
