import type { SQSRecord } from 'aws-lambda';
import { ConfigurationError } from '../engine/errors.js';
import { fingerprint, selectedKey, selectionFingerprint } from '../engine/fingerprint.js';
import { MAX_KEY_LENGTH, scopedKey } from '../engine/key.js';
import { InvalidRecordKeyError } from './errors.js';
import { byMessageId, type RecordKeySource } from './record-key.js';

/** How a consumer names its records. */
export interface RecordIdentityOptions {
  /** The consumer's name, e.g. `orders-fulfilment`: the operation the keys are scoped to. */
  readonly name: string;
  /**
   * The engine scopes every key to an account; a queue consumer has none, so it uses a fixed scope: by default its
   * name. Give another (a tenant, a bounded context) to share keys between consumers or to keep them apart.
   */
  readonly scope?: string;
  /**
   * Where the key comes from: {@link byMessageId} (the default), {@link byMessageAttribute}, {@link byBodyField},
   * or a subset of the body ({@link fromBody}, Powertools' `eventKeyJmesPath`), hashed canonically into the key.
   */
  readonly key?: RecordKeySource;
  /**
   * Also compare bodies: a key that comes back with a different body is then a mismatch. Off by default, because
   * with a business key a producer that re-sends the same event with a re-rendered body (a new timestamp, a new
   * trace id) is still sending the same event, and a mismatch is a failure that would loop into the DLQ.
   * JSON bodies are compared canonically (member order and whitespace don't count).
   *
   * Changing this on a live consumer changes stored fingerprints: until records expire (24 h by default), keys
   * claimed under the old setting come back as mismatches.
   */
  readonly fingerprintBody?: boolean;
  /**
   * Compare a part of the record instead of the whole body: what must be equal for a later delivery under the same
   * key to count as the same message (Powertools' `payloadValidationJmesPath`), e.g.
   * `fromBody((order: Order) => ({ amount: order.amount, items: order.items }))`. Compared canonically; a different
   * value under the same key is a mismatch. Not together with `fingerprintBody`; the same caution applies.
   */
  readonly fingerprint?: (record: SQSRecord) => unknown;
}

/** A record's identity for the engine: its scoped key and the fingerprint stored with it. */
export interface RecordIdentity {
  /** The key as stored: scope, consumer name and the record's own key. */
  readonly key: string;
  readonly fingerprint: string;
}

/**
 * Derives the stored key and the fingerprint of a record.
 *
 * @example
 * const { key, fingerprint } = recordIdentity(record, { name: 'orders', key: byBodyField('orderId') });
 *
 * @throws {InvalidRecordKeyError} the key source threw, or gave an empty or too long key, or one a store can't keep as
 * it is (a NUL, or a lone surrogate).
 */
export function recordIdentity(record: SQSRecord, options: RecordIdentityOptions): RecordIdentity {
  if (options.fingerprint && options.fingerprintBody) {
    throw new ConfigurationError('fingerprint and fingerprintBody both say what to compare: give one of them');
  }
  const source = options.key ?? byMessageId;
  const ownKey = selectedKey(taken(record, () => source(record)));
  if (ownKey === undefined) {
    throw new InvalidRecordKeyError(record.messageId, 'the key is empty');
  }
  if (ownKey.length > MAX_KEY_LENGTH) {
    throw new InvalidRecordKeyError(record.messageId, `the key is longer than ${MAX_KEY_LENGTH} characters`);
  }
  // A key a store can't keep as it is (a NUL, or a lone surrogate: `"\ud800"` in a JSON body, which both stores keep as
  // U+FFFD) would join another message's operation, and this message would be acknowledged as its replay, unprocessed.
  const key = taken(record, () =>
    scopedKey({ accountId: options.scope ?? options.name, operation: options.name, key: ownKey }),
  );
  return {
    key,
    // Under one key, the fingerprint decides "same message or not". By default that is the key itself: every
    // delivery under the key is the same work. With fingerprintBody, the body must match too; with fingerprint,
    // the part of the record it selects.
    fingerprint: options.fingerprint
      ? selectionFingerprint(
          options.name,
          taken(record, () => options.fingerprint?.(record)),
        )
      : options.fingerprintBody
        ? fingerprint({ operation: options.name, body: record.body })
        : fingerprint({ operation: options.name, body: ownKey, contentType: 'text/plain' }),
  };
}

/** A selection from the record; one that throws (an unparsable body) makes the record unusable, like a bad key. */
function taken<T>(record: SQSRecord, select: () => T): T {
  try {
    return select();
  } catch (error) {
    throw new InvalidRecordKeyError(record.messageId, error instanceof Error ? error.message : String(error), {
      cause: error,
    });
  }
}
