import { randomUUID } from 'node:crypto';
import { networkInterfaces } from 'node:os';
import {
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { createQueueWithDlq, type LocalSqs, type QueueWithDlq, startLocalSqs } from '../src/sqs';
import { type SqsHandler, type SqsPoller, startSqsPoller } from '../src/sqs-poller';
import { eventually, recordingLog } from './support';

/** Short enough to keep redelivery tests fast; the consumer's timeout must fit inside it, as on AWS. */
const VISIBILITY_TIMEOUT_SECONDS = 1;
const FUNCTION_TIMEOUT_MS = 1_000;

interface Delivery {
  event: SQSEvent;
  context: Context;
}

/*
 * The poller tests wait out visibility timeouts, so they run concurrently, each on its own queues and stopping its
 * own poller: the file takes about as long as its slowest test. Jest starts concurrent tests right after the
 * file's top-level hooks, so the emulator is started at the top level.
 */
let sqs: LocalSqs;
const pollers: SqsPoller[] = [];
const log = recordingLog();

beforeAll(async () => {
  sqs = await startLocalSqs();
});

afterAll(async () => {
  await Promise.all(pollers.splice(0).map((poller) => poller.stop()));
  await sqs.close();
});

describe('local SQS', () => {
  async function queue(maxReceiveCount = 3): Promise<QueueWithDlq> {
    return createQueueWithDlq(sqs.client, `q-${randomUUID().slice(0, 8)}`, {
      maxReceiveCount,
      visibilityTimeoutSeconds: VISIBILITY_TIMEOUT_SECONDS,
    });
  }

  async function send(queueUrl: string, bodies: string[]): Promise<void> {
    await sqs.client.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: bodies.map((body, index) => ({ Id: String(index), MessageBody: body })),
      }),
    );
  }

  /** Starts a poller whose handler records each delivery, then answers with `respond`. */
  async function poll(
    target: QueueWithDlq,
    respond: (event: SQSEvent, deliveries: Delivery[]) => Promise<SQSBatchResponse | undefined>,
  ): Promise<{ deliveries: Delivery[]; poller: SqsPoller }> {
    const deliveries: Delivery[] = [];
    const handler: SqsHandler = async (event, context) => {
      deliveries.push({ event, context });
      return respond(event, deliveries);
    };
    const poller = await startSqsPoller({
      client: sqs.client,
      queueUrl: target.queueUrl,
      queueArn: target.queueArn,
      handler,
      functionTimeoutMs: FUNCTION_TIMEOUT_MS,
      log,
    });
    pollers.push(poller); // stopped in afterAll if a failing test didn't get to stop it
    return { deliveries, poller };
  }

  function records(deliveries: Delivery[]): SQSRecord[] {
    return deliveries.flatMap((delivery) => delivery.event.Records);
  }

  async function messageCounts(queueUrl: string): Promise<{ visible: number; inFlight: number }> {
    const { Attributes } = await sqs.client.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    return {
      visible: Number(Attributes?.ApproximateNumberOfMessages),
      inFlight: Number(Attributes?.ApproximateNumberOfMessagesNotVisible),
    };
  }

  describe('startLocalSqs', () => {
    it.concurrent('listens on 127.0.0.1 and nowhere else', async () => {
      expect(sqs.endpoint).toBe(`http://127.0.0.1:${sqs.port}`);
      const otherAddress = Object.values(networkInterfaces())
        .flat()
        .find((address) => address?.family === 'IPv4' && !address.internal)?.address;
      // A machine with no non-loopback interface has nothing to check beyond the endpoint itself.
      if (otherAddress) {
        await expect(fetch(`http://${otherAddress}:${sqs.port}/`)).rejects.toThrow();
      }
    });
  });

  describe('createQueueWithDlq', () => {
    it.concurrent('wires the queue to its DLQ with a RedrivePolicy and sets the visibility timeout', async () => {
      const created = await createQueueWithDlq(sqs.client, 'orders', {
        maxReceiveCount: 4,
        visibilityTimeoutSeconds: 7,
      });

      const { Attributes } = await sqs.client.send(
        new GetQueueAttributesCommand({ QueueUrl: created.queueUrl, AttributeNames: ['All'] }),
      );
      expect(created.dlqArn).toBe('arn:aws:sqs:local:000000000000:orders-dlq');
      expect(JSON.parse(Attributes?.RedrivePolicy ?? '{}')).toEqual({
        deadLetterTargetArn: created.dlqArn,
        maxReceiveCount: 4,
      });
      expect(Attributes?.VisibilityTimeout).toBe('7');
    });
  });

  describe('startSqsPoller', () => {
    it.concurrent('delivers a batch as the Lambda SQS event, and deletes it when the handler succeeds', async () => {
      const target = await queue();
      await sqs.client.send(
        new SendMessageCommand({
          QueueUrl: target.queueUrl,
          MessageBody: '{"orderId":"o-1"}',
          MessageAttributes: {
            tenant: { DataType: 'String', StringValue: 't-1' },
            attempt: { DataType: 'Number', StringValue: '3' },
            blob: { DataType: 'Binary', BinaryValue: Buffer.from('hi') },
          },
        }),
      );
      await send(target.queueUrl, ['second', 'third']);

      const { deliveries, poller } = await poll(target, async () => undefined);
      await eventually(() => (records(deliveries).length === 3 ? true : undefined));
      await eventually(async () => ((await messageCounts(target.queueUrl)).inFlight === 0 ? true : undefined));

      expect(deliveries).toHaveLength(1);
      const [first] = deliveries[0]!.event.Records;
      expect(first).toEqual({
        messageId: expect.stringMatching(/^[0-9a-f-]{36}$/),
        receiptHandle: expect.any(String),
        body: '{"orderId":"o-1"}',
        attributes: {
          ApproximateReceiveCount: '1',
          SentTimestamp: expect.stringMatching(/^\d{13}$/),
          SenderId: expect.any(String),
          ApproximateFirstReceiveTimestamp: expect.stringMatching(/^\d{13}$/),
        },
        messageAttributes: {
          tenant: { stringValue: 't-1', stringListValues: [], binaryListValues: [], dataType: 'String' },
          attempt: { stringValue: '3', stringListValues: [], binaryListValues: [], dataType: 'Number' },
          blob: { binaryValue: 'aGk=', stringListValues: [], binaryListValues: [], dataType: 'Binary' },
        },
        md5OfBody: expect.stringMatching(/^[0-9a-f]{32}$/),
        md5OfMessageAttributes: expect.stringMatching(/^[0-9a-f]{32}$/),
        eventSource: 'aws:sqs',
        eventSourceARN: target.queueArn,
        awsRegion: 'local',
      });
      expect(deliveries[0]!.context.getRemainingTimeInMillis()).toBeLessThanOrEqual(FUNCTION_TIMEOUT_MS);
      expect(await messageCounts(target.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
      await poller.stop();
    });

    it.concurrent('deletes only the successes of a partial failure, and redelivers the failure with receive count 2', async () => {
      const target = await queue();
      await send(target.queueUrl, ['ok-1', 'fail', 'ok-2']);

      const { deliveries, poller } = await poll(target, async (event, all) => {
        const failing = all.length === 1 ? event.Records.filter((record) => record.body === 'fail') : [];
        return { batchItemFailures: failing.map((record) => ({ itemIdentifier: record.messageId })) };
      });
      await eventually(() => (deliveries.length === 2 ? true : undefined));

      expect(deliveries[0]!.event.Records.map((record) => record.body)).toEqual(['ok-1', 'fail', 'ok-2']);
      expect(deliveries[1]!.event.Records).toEqual([
        expect.objectContaining({
          body: 'fail',
          attributes: expect.objectContaining({ ApproximateReceiveCount: '2' }),
        }),
      ]);
      await eventually(async () => ((await messageCounts(target.queueUrl)).inFlight === 0 ? true : undefined));
      await poller.stop();
    });

    it.concurrent('deletes nothing when the handler throws (a crash before the ack): the whole batch comes back', async () => {
      const target = await queue();
      await send(target.queueUrl, ['a', 'b']);

      const { deliveries, poller } = await poll(target, async (_event, all) => {
        if (all.length === 1) throw new Error('crashed after the side effect, before the ack');
        return undefined;
      });
      await eventually(() => (deliveries.length === 2 ? true : undefined));

      expect(
        records([deliveries[1]!]).map((record) => [record.body, record.attributes.ApproximateReceiveCount]),
      ).toEqual([
        ['a', '2'],
        ['b', '2'],
      ]);
      expect(log.errors.some((entry) => entry.message === 'handler failed')).toBe(true);
      await poller.stop();
    });

    it.concurrent('fails the whole batch when an itemIdentifier is not a message of the batch, as AWS does', async () => {
      const target = await queue();
      await send(target.queueUrl, ['a', 'b']);

      const { deliveries, poller } = await poll(target, async (_event, all) =>
        all.length === 1 ? { batchItemFailures: [{ itemIdentifier: '' }] } : undefined,
      );
      await eventually(() => (deliveries.length === 2 ? true : undefined));

      expect(records([deliveries[1]!]).map((record) => record.body)).toEqual(['a', 'b']);
      await poller.stop();
    });

    it.concurrent('lets SQS move a poison message to the DLQ after maxReceiveCount deliveries', async () => {
      const target = await queue(2);
      await send(target.queueUrl, ['poison']);

      const { deliveries, poller } = await poll(target, async () => {
        throw new Error('cannot process this message');
      });
      const dead = await eventually(async () => {
        const { Messages } = await sqs.client.send(
          new ReceiveMessageCommand({
            QueueUrl: target.dlqUrl,
            WaitTimeSeconds: 1,
            MessageSystemAttributeNames: ['All'],
          }),
        );
        return Messages?.[0];
      });

      expect(dead.Body).toBe('poison');
      expect(deliveries.map((delivery) => delivery.event.Records[0]!.attributes.ApproximateReceiveCount)).toEqual([
        '1',
        '2',
      ]);
      expect(await messageCounts(target.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
      await poller.stop();
    });

    it.concurrent('stops cleanly: waits for the batch in flight, acks it, and delivers nothing afterwards', async () => {
      const target = await queue();
      await send(target.queueUrl, ['slow']);
      let finished = false;
      const { deliveries, poller } = await poll(target, async () => {
        await new Promise((resolve) => setTimeout(resolve, 300));
        finished = true;
        return undefined;
      });
      await eventually(() => (deliveries.length === 1 ? true : undefined));

      await poller.stop();

      expect(finished).toBe(true);
      expect(await messageCounts(target.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
      await send(target.queueUrl, ['after stop']);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(deliveries).toHaveLength(1);
    });

    it.concurrent('reports drained once every visible message has been handled', async () => {
      const target = await queue();
      const { deliveries, poller } = await poll(target, async () => undefined);
      await send(target.queueUrl, ['one', 'two']);

      await poller.drained();

      expect(
        records(deliveries)
          .map((record) => record.body)
          .sort(),
      ).toEqual(['one', 'two']);
      await poller.stop();
    });

    it.concurrent('refuses a function timeout longer than the visibility timeout, like CreateEventSourceMapping', async () => {
      const target = await queue();

      await expect(
        startSqsPoller({
          client: sqs.client,
          queueUrl: target.queueUrl,
          queueArn: target.queueArn,
          handler: async () => undefined,
          functionTimeoutMs: 5_000,
        }),
      ).rejects.toThrow(/visibility timeout: 1 seconds is less than Function timeout: 5 seconds/);
    });
  });
});
