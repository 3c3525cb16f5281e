import { randomUUID } from 'node:crypto';
import { FullBatchFailureError } from '@aws-lambda-powertools/batch';
import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import {
  createQueueWithDlq,
  type LocalSqs,
  type QueueWithDlq,
  startLocalSqs,
} from '@keystone-idempotency/local-aws/sqs';
import { toSqsRecord } from '@keystone-idempotency/local-aws/sqs-event';
import type { Context, SQSEvent, SQSRecord } from 'aws-lambda';
import { DynamoDbStore } from '../../src/dynamodb/store';
import {
  byBodyField,
  DeadLetterError,
  fromBody,
  makeSqsIdempotentHandler,
  queueUrlOf,
  type RecordKeySource,
  RetryLaterError,
  recordIdentity,
} from '../../src/sqs';
import { testDatabase } from '../support/dynamodb';
import { storeHarnesses } from '../support/stores';

/**
 * What the SQS adapter does to the queue itself, against the fauxqs emulator: a record that is not ready comes
 * back after the delay its function asked for (not after the queue's visibility timeout), and a record that can
 * never succeed moves to the dead-letter queue at once.
 */
const db = testDatabase();
const VISIBILITY_SECONDS = 30;
let sqs: LocalSqs;
let queue: QueueWithDlq;

beforeAll(async () => {
  sqs = await startLocalSqs();
  queue = await createQueueWithDlq(sqs.client, `actions-${randomUUID().slice(0, 8)}`, {
    maxReceiveCount: 5,
    visibilityTimeoutSeconds: VISIBILITY_SECONDS,
  });
});
afterAll(() => sqs?.close());

const lambdaContext = { getRemainingTimeInMillis: () => 4_000 } as Context;

/** Sends one message and receives it, as the event source mapping would, into a Lambda-shaped record. */
async function deliver(body: unknown): Promise<SQSRecord> {
  await sqs.client.send(new SendMessageCommand({ QueueUrl: queue.queueUrl, MessageBody: JSON.stringify(body) }));
  const { Messages } = await sqs.client.send(
    new ReceiveMessageCommand({
      QueueUrl: queue.queueUrl,
      MaxNumberOfMessages: 1,
      WaitTimeSeconds: 2,
      MessageSystemAttributeNames: ['All'],
      MessageAttributeNames: ['All'],
    }),
  );
  const message = Messages?.[0];
  if (!message) throw new Error('no message received');
  return toSqsRecord(message, { queueArn: queue.queueArn, region: 'local' });
}

async function receiveWithin(url: string, seconds: number): Promise<string[]> {
  const { Messages } = await sqs.client.send(
    new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: seconds }),
  );
  return (Messages ?? []).map((message) => message.Body ?? '');
}

function consumer(
  process: (record: SQSRecord) => Promise<unknown>,
  withQueue = true,
  store = new DynamoDbStore({ client: db.doc, tableName: db.idempotencyTable }),
  name = `actions-${randomUUID().slice(0, 8)}`,
) {
  const lines: { level: string; message: string }[] = [];
  const handler = makeSqsIdempotentHandler({
    store,
    name,
    process,
    logger: {
      info: (message) => lines.push({ level: 'info', message }),
      warn: (message) => lines.push({ level: 'warn', message }),
      error: (message) => lines.push({ level: 'error', message }),
    },
    ...(withQueue ? { queue: { client: sqs.client, url: queue.queueUrl, deadLetterUrl: queue.dlqUrl } } : {}),
  });
  return { handler, lines, invoke: (record: SQSRecord) => handler({ Records: [record] } as SQSEvent, lambdaContext) };
}

describe('a record whose function throws RetryLaterError', () => {
  it('comes back after the delay asked for, not after the visibility timeout, logged as a wait', async () => {
    const body = { id: randomUUID() };
    const { invoke, lines } = consumer(async () => {
      throw new RetryLaterError('the payment is not recorded yet', 1000);
    });
    const record = await deliver(body);
    // Alone in its batch and only waiting: not a function error (nothing thrown, no ERROR line).
    const response = await invoke(record);
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
    expect(lines).toEqual([{ level: 'info', message: 'record not ready; it will come back' }]);
    const started = Date.now();
    expect(await receiveWithin(queue.queueUrl, 5)).toEqual([JSON.stringify(body)]);
    expect(Date.now() - started).toBeLessThan(5000); // the queue's own timeout is 30 s
  });

  it('without queue access still fails the record, which then waits out the visibility timeout', async () => {
    const { invoke } = consumer(async () => {
      throw new RetryLaterError('not yet', 1000);
    }, false);
    const record = await deliver({ id: randomUUID() });
    expect((await invoke(record)).batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
    expect(await receiveWithin(queue.queueUrl, 2)).toEqual([]);
  });
});

describe('a record whose function throws DeadLetterError', () => {
  it('moves to the dead-letter queue at once with one clear line, and is acknowledged', async () => {
    const body = { id: randomUUID() };
    const { invoke, lines } = consumer(async () => {
      throw new DeadLetterError('the event names another charge than the payment');
    });
    const record = await deliver(body);
    expect((await invoke(record)).batchItemFailures).toEqual([]);
    expect(lines).toEqual([{ level: 'error', message: 'record can never succeed; moved to the dead-letter queue' }]);
    expect(await receiveWithin(queue.dlqUrl, 2)).toEqual([JSON.stringify(body)]);
  });
});

describe.each(storeHarnesses)('records whose JSON bodies carry lone surrogates, on %s', (_name, harness) => {
  const h = harness();
  // A queue of its own: what these tests leave in the dead-letter queue is theirs to read.
  let own: QueueWithDlq;
  beforeAll(async () => {
    own = await createQueueWithDlq(sqs.client, `surrogates-${randomUUID().slice(0, 8)}`, {
      maxReceiveCount: 5,
      visibilityTimeoutSeconds: VISIBILITY_SECONDS,
    });
  });

  /** Sends `body` as it is (SQS carries only XML characters: `\ud800` travels as its six-character JSON escape). */
  async function deliverRaw(body: string): Promise<SQSRecord> {
    await sqs.client.send(new SendMessageCommand({ QueueUrl: own.queueUrl, MessageBody: body }));
    const { Messages } = await sqs.client.send(
      new ReceiveMessageCommand({
        QueueUrl: own.queueUrl,
        MaxNumberOfMessages: 1,
        WaitTimeSeconds: 2,
        MessageSystemAttributeNames: ['All'],
      }),
    );
    const message = Messages?.[0];
    if (!message) throw new Error('no message received');
    expect(message.Body).toBe(body);
    return toSqsRecord(message, { queueArn: own.queueArn, region: 'local' });
  }

  function orders(key: RecordKeySource, withDeadLetters = true) {
    const processed: string[] = [];
    const handler = makeSqsIdempotentHandler({
      store: h.store(),
      name: `orders-${randomUUID().slice(0, 8)}`,
      key,
      process: async (record) => {
        processed.push(record.body);
        return 'shipped';
      },
      logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
      ...(withDeadLetters ? { queue: { client: sqs.client, url: own.queueUrl, deadLetterUrl: own.dlqUrl } } : {}),
    });
    return { processed, invoke: (record: SQSRecord) => handler({ Records: [record] } as SQSEvent, lambdaContext) };
  }

  const first = '{"orderId":"ord-\\ud800"}';
  const second = '{"orderId":"ord-\\ud801"}';

  it.each([
    ['byBodyField', byBodyField('orderId')],
    ['fromBody', fromBody((order: { orderId: string }) => order.orderId)],
  ])(
    'never acknowledges the second as a replay of the first (%s): both go to the dead-letter queue',
    async (_source, key) => {
      const { processed, invoke } = orders(key);
      for (const body of [first, second]) {
        const record = await deliverRaw(body);
        // Acknowledged only because it is now in the dead-letter queue: never run, never taken for another's replay.
        expect((await invoke(record)).batchItemFailures).toEqual([]);
      }
      expect(processed).toEqual([]);
      const dead = [...(await receiveWithin(own.dlqUrl, 2)), ...(await receiveWithin(own.dlqUrl, 1))];
      expect(dead.sort()).toEqual([first, second].sort());
    },
  );

  it('fails such a record without a dead-letter queue to move it to: never acknowledged, never run', async () => {
    const { processed, invoke } = orders(byBodyField('orderId'), false);
    const record = await deliverRaw(first);
    // Alone in its batch, its failure fails the batch (Powertools' default): SQS delivers it again, as a failure.
    await expect(invoke(record)).rejects.toBeInstanceOf(FullBatchFailureError);
    expect(processed).toEqual([]);
  });

  it('processes both when the key is a subset of the body, hashed losslessly', async () => {
    const { processed, invoke } = orders(fromBody((order: { orderId: string }) => [order.orderId]));
    for (const body of [first, second]) expect((await invoke(await deliverRaw(body))).batchItemFailures).toEqual([]);
    expect(processed).toEqual([first, second]);
  });
});

describe('a record another consumer is still working on', () => {
  it("comes back when the owner's lease has run out, not every second, so it never spends its receives", async () => {
    // A duplicate told to come back in a second used up five receives in about five seconds and reached the DLQ
    // while its original was still working. It now waits for the original to finish (a replay) or die (a takeover).
    const store = new DynamoDbStore({ client: db.doc, tableName: db.idempotencyTable, leaseSeconds: 6 });
    const name = `actions-${randomUUID().slice(0, 8)}`;
    const body = { id: randomUUID() };
    const record = await deliver(body);
    const original = await store.claim(
      recordIdentity(record, { name }).key,
      recordIdentity(record, { name }).fingerprint,
    );
    expect(original.kind).toBe('acquired');
    const { invoke, lines } = consumer(async () => 'ran', true, store, name);
    const started = Date.now();
    expect((await invoke(record)).batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
    expect(lines).toEqual([
      { level: 'info', message: 'record in flight elsewhere; it comes back when its lease has run out' },
    ]);
    expect(await receiveWithin(queue.queueUrl, 3)).toEqual([]);
    expect(await receiveWithin(queue.queueUrl, 10)).toEqual([JSON.stringify(body)]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(5000);
  });
});

describe('queueUrlOf', () => {
  it('derives a queue URL from its ARN', () => {
    expect(queueUrlOf('arn:aws:sqs:eu-west-1:123456789012:orders')).toBe(
      'https://sqs.eu-west-1.amazonaws.com/123456789012/orders',
    );
  });
});
