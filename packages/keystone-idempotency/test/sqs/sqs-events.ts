import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Context, SQSEvent, SQSMessageAttributes, SQSRecord } from 'aws-lambda';
import type { SqsLogger } from '../../src/sqs';

const REGION = 'us-east-1';
const ACCOUNT = '000000000000';

export interface RecordSpec {
  readonly body: unknown;
  readonly messageId?: string;
  /** A FIFO record: its message group. The queue then is `<queue>.fifo`. */
  readonly groupId?: string;
  readonly queue?: string;
  readonly messageAttributes?: Record<string, string>;
  readonly receiveCount?: number;
}

/** An SQS record as Lambda's event source mapping delivers it: string attributes, md5, receipt handle, ARN. */
export function sqsRecord(spec: RecordSpec): SQSRecord {
  const body = typeof spec.body === 'string' ? spec.body : JSON.stringify(spec.body);
  const fifo = spec.groupId !== undefined;
  const queue = spec.queue ?? (fifo ? 'orders.fifo' : 'orders');
  const sent = Date.now();
  const messageAttributes: SQSMessageAttributes = Object.fromEntries(
    Object.entries(spec.messageAttributes ?? {}).map(([name, value]) => [
      name,
      { stringValue: value, stringListValues: [], binaryListValues: [], dataType: 'String' },
    ]),
  );
  return {
    messageId: spec.messageId ?? randomUUID(),
    receiptHandle: receiptHandle(),
    body,
    attributes: {
      ApproximateReceiveCount: String(spec.receiveCount ?? 1),
      SentTimestamp: String(sent),
      SenderId: 'AIDAIENQZJOLO23YVJ4VO',
      ApproximateFirstReceiveTimestamp: String(sent + 3),
      ...(fifo
        ? {
            MessageGroupId: spec.groupId,
            MessageDeduplicationId: createHash('sha256').update(body).digest('hex'),
            SequenceNumber: String(18_800_000_000_000_000_000n + BigInt(sent)),
          }
        : {}),
    },
    messageAttributes,
    md5OfBody: createHash('md5').update(body).digest('hex'),
    eventSource: 'aws:sqs',
    eventSourceARN: `arn:aws:sqs:${REGION}:${ACCOUNT}:${queue}`,
    awsRegion: REGION,
  };
}

/** The same message delivered again (visibility timeout, failed batch): same id, new receipt handle. */
export function redelivered(record: SQSRecord): SQSRecord {
  const count = Number(record.attributes.ApproximateReceiveCount) + 1;
  return {
    ...record,
    receiptHandle: receiptHandle(),
    attributes: { ...record.attributes, ApproximateReceiveCount: String(count) },
  };
}

/** The same event sent again by the producer: a new message, with a new id. */
export function resent(record: SQSRecord): SQSRecord {
  return { ...redelivered(record), messageId: randomUUID(), attributes: { ...record.attributes } };
}

export function sqsEvent(...records: SQSRecord[]): SQSEvent {
  return { Records: records };
}

export function lambdaContext(timeoutMs = 30_000): Context {
  const deadline = Date.now() + timeoutMs;
  const fail = () => {
    throw new Error('callback-style completion is not supported');
  };
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: 'orders-consumer',
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${REGION}:${ACCOUNT}:function:orders-consumer`,
    memoryLimitInMB: '128',
    awsRequestId: randomUUID(),
    logGroupName: '/aws/lambda/orders-consumer',
    logStreamName: '2026/11/30/[$LATEST]0123456789abcdef',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: fail,
    fail,
    succeed: fail,
  };
}

/** A logger that keeps what it was told, for assertions, and prints nothing. */
export function recordingLogger(): SqsLogger & { readonly lines: { level: string; message: string }[] } {
  const lines: { level: string; message: string }[] = [];
  return {
    lines,
    warn: (message) => void lines.push({ level: 'warn', message }),
    error: (message) => void lines.push({ level: 'error', message }),
  };
}

function receiptHandle(): string {
  return `AQEB${randomBytes(96).toString('base64')}`;
}
