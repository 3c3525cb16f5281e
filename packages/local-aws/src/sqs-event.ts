import type { Message, MessageAttributeValue } from '@aws-sdk/client-sqs';
import type { SQSMessageAttribute, SQSRecord, SQSRecordAttributes } from 'aws-lambda';

/** Where the records come from: the queue's ARN and region, as the event source mapping knows them. */
export interface SqsEventSource {
  readonly queueArn: string;
  readonly region: string;
}

/**
 * Converts a received message to the record Lambda's SQS event source mapping delivers: camelCase fields, system
 * attributes as strings, message attributes with lower-case keys and a base64 `binaryValue`, and the empty list
 * fields Lambda always includes.
 */
export function toSqsRecord(message: Message, source: SqsEventSource): SQSRecord {
  const { MessageId, ReceiptHandle, Body, MD5OfBody } = message;
  if (!MessageId || !ReceiptHandle || Body === undefined || !MD5OfBody) {
    throw new Error(`ReceiveMessage returned an incomplete message: ${JSON.stringify(message)}`);
  }
  const record: SQSRecord = {
    messageId: MessageId,
    receiptHandle: ReceiptHandle,
    body: Body,
    attributes: recordAttributes(message.Attributes ?? {}),
    messageAttributes: Object.fromEntries(
      Object.entries(message.MessageAttributes ?? {}).map(([name, value]) => [name, recordMessageAttribute(value)]),
    ),
    md5OfBody: MD5OfBody,
    eventSource: 'aws:sqs',
    eventSourceARN: source.queueArn,
    awsRegion: source.region,
  };
  if (message.MD5OfMessageAttributes) record.md5OfMessageAttributes = message.MD5OfMessageAttributes;
  return record;
}

/** The four attributes every record has, then the FIFO and tracing ones only when SQS returned them. */
function recordAttributes(attributes: Partial<Record<string, string>>): SQSRecordAttributes {
  const required = ['ApproximateReceiveCount', 'SentTimestamp', 'SenderId', 'ApproximateFirstReceiveTimestamp'];
  for (const name of required) {
    if (attributes[name] === undefined) throw new Error(`ReceiveMessage returned no ${name} attribute`);
  }
  return attributes as unknown as SQSRecordAttributes;
}

function recordMessageAttribute(value: MessageAttributeValue): SQSMessageAttribute {
  const attribute: SQSMessageAttribute = {
    stringListValues: value.StringListValues ?? [],
    binaryListValues: (value.BinaryListValues ?? []).map((bytes) => Buffer.from(bytes).toString('base64')),
    dataType: value.DataType ?? 'String',
  };
  if (value.StringValue !== undefined) attribute.stringValue = value.StringValue;
  if (value.BinaryValue !== undefined) attribute.binaryValue = Buffer.from(value.BinaryValue).toString('base64');
  return attribute;
}
