import type { SQSRecord } from 'aws-lambda';

/**
 * Where a record's idempotency key comes from: a string, or a subset of the record (any other JSON value), which is
 * hashed from its canonical JSON into the key. It runs before any claim; throwing (or selecting nothing: an empty
 * string, undefined, null) fails the record, which then goes the way of any poison message: redelivered, and to the
 * DLQ in the end.
 */
export type RecordKeySource = (record: SQSRecord) => unknown;

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

/**
 * A selection from the record's JSON body: a subset that names the message (`(order: Order) => [order.customerId,
 * order.orderId]`, Powertools' `eventKeyJmesPath` on `powertools_json(body)`), as the key, or the part of it to
 * compare, as the `fingerprint`. The body is parsed, not validated: `TBody` is what the producer promises. A body
 * that is not JSON fails the record.
 *
 * @example
 * makeSqsIdempotentHandler({
 *   store,
 *   name: 'orders',
 *   key: fromBody((order: Order) => [order.customerId, order.orderId]),
 *   fingerprint: fromBody((order: Order) => order.items),
 *   process,
 * });
 */
export function fromBody<TBody>(select: (body: TBody) => unknown): (record: SQSRecord) => unknown {
  return function selectFromBody(record) {
    return select(JSON.parse(record.body) as TBody);
  };
}
