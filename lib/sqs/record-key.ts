import type { SQSRecord } from 'aws-lambda';

/**
 * Where a record's idempotency key comes from. It runs before any claim; throwing (or returning an empty string)
 * fails the record, which then goes the way of any poison message: redelivered, and to the DLQ in the end.
 */
export type RecordKeySource = (record: SQSRecord) => string;

/**
 * The SQS message id: the default. It catches redeliveries of one message (visibility timeout, a failed batch, SQS's
 * own at-least-once duplicates), but not a producer that sends the same event again, since every SendMessage gets a
 * new message id. Prefer a business key when the producer can retry.
 *
 * @example
 * makeSqsIdempotentHandler({ store, name: 'orders', key: byMessageId, process });
 */
export const byMessageId: RecordKeySource = (record) => record.messageId;

/**
 * A string message attribute set by the producer, e.g. `idempotencyKey`. A re-sent message carries the same
 * attribute, so it is recognized even under a new message id.
 *
 * @example
 * makeSqsIdempotentHandler({ store, name: 'orders', key: byMessageAttribute('idempotencyKey'), process });
 */
export function byMessageAttribute(name: string): RecordKeySource {
  return function keyFromMessageAttribute(record) {
    const value = record.messageAttributes[name]?.stringValue;
    if (value === undefined) throw new Error(`the message has no string attribute ${name}`);
    return value;
  };
}

/**
 * A top-level field of a JSON body, e.g. the event's `orderId` or `eventId`: the business key. A string or a
 * number; anything else fails the record.
 *
 * @example
 * makeSqsIdempotentHandler({ store, name: 'orders', key: byBodyField('orderId'), process });
 */
export function byBodyField(field: string): RecordKeySource {
  return function keyFromBodyField(record) {
    const body: unknown = JSON.parse(record.body);
    const value = typeof body === 'object' && body !== null ? (body as Record<string, unknown>)[field] : undefined;
    if (typeof value === 'string') return value;
    if (typeof value === 'number' && Number.isFinite(value)) return String(value);
    throw new Error(`the body has no string or number field ${field}`);
  };
}
