import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { IdempotencyRecord, StoredResponse } from '../engine/record.js';
import type { StepProgress } from '../engine/steps.js';
import { RecordAttribute as A } from './layout.js';
import { recoveryShardOf } from './recovery-index.js';

/**
 * The idempotency record as a DynamoDB item, and back. The one place attribute names meet record fields: the
 * recovery index's two attributes are written exactly when the record carries `recoverAt`, and the TTL attribute
 * exactly when it carries `expiresAt` (never both: DynamoDB's TTL must never delete an unfinished recoverable
 * operation, however far behind recovery is).
 */
export function toItem(record: IdempotencyRecord): Record<string, unknown> {
  return {
    [A.key]: record.key,
    [A.status]: record.status,
    [A.fingerprint]: record.fingerprint,
    [A.leaseToken]: record.leaseToken,
    [A.leaseExpiresAt]: record.leaseExpiresAt,
    ...(record.expiresAt !== undefined ? { [A.expiresAt]: record.expiresAt } : {}),
    [A.downstreamKey]: record.downstreamKey,
    [A.attempt]: record.attempt,
    [A.createdAt]: record.createdAt,
    ...(record.response ? { [A.response]: record.response } : {}),
    ...(record.recoverAt !== undefined
      ? { [A.recoveryShard]: recoveryShardOf(record.key), [A.recoverAt]: record.recoverAt }
      : {}),
    ...(record.progress ? progressAttributes(record.progress) : {}),
  };
}

/** A multi-step operation's progress as its two attributes. */
export function progressAttributes(progress: StepProgress): Record<string, unknown> {
  return { [A.steps]: JSON.stringify(progress.steps), [A.stepRevision]: progress.revision };
}

export function fromItem(item: Record<string, unknown>): IdempotencyRecord {
  return {
    key: item[A.key] as string,
    status: item[A.status] as IdempotencyRecord['status'],
    fingerprint: item[A.fingerprint] as string,
    leaseToken: item[A.leaseToken] as string,
    leaseExpiresAt: Number(item[A.leaseExpiresAt]),
    ...(item[A.expiresAt] !== undefined ? { expiresAt: Number(item[A.expiresAt]) } : {}),
    downstreamKey: item[A.downstreamKey] as string,
    attempt: Number(item[A.attempt] ?? 1),
    createdAt: Number(item[A.createdAt]),
    ...(item[A.response] ? { response: item[A.response] as StoredResponse } : {}),
    ...(item[A.recoverAt] !== undefined ? { recoverAt: Number(item[A.recoverAt]) } : {}),
    ...(typeof item[A.steps] === 'string'
      ? {
          progress: {
            revision: Number(item[A.stepRevision] ?? 0),
            steps: JSON.parse(item[A.steps] as string) as StepProgress['steps'],
          },
        }
      : {}),
  };
}

/**
 * A record as a failed condition returned it (`ReturnValuesOnConditionCheckFailure: 'ALL_OLD'`): in raw
 * AttributeValue form even through the DocumentClient. Undefined when the error carried no item (it vanished between
 * the check and the reply).
 */
export function recordFromRaw(raw: Record<string, AttributeValue> | undefined): IdempotencyRecord | undefined {
  return raw ? fromItem(unmarshall(raw)) : undefined;
}
