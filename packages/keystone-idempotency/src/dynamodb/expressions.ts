import type { UpdateCommandInput } from '@aws-sdk/lib-dynamodb';
import { type IdempotencyRecord, type Lease, RecordStatus, type StoredResponse } from '../engine/record.js';
import type { StepProgress } from '../engine/steps.js';
import { RecordAttribute as A } from './layout.js';
import { recoveryShardOf } from './recovery-index.js';

/**
 * The conditions and updates of the fencing rule, as DynamoDB expressions. Each comment says the invariant the
 * condition keeps; the store decides when each one is sent.
 */

type Condition = Required<Pick<UpdateCommandInput, 'ConditionExpression'>> & {
  ExpressionAttributeNames: Record<string, string>;
  ExpressionAttributeValues: Record<string, unknown>;
};

/**
 * The key is free: no record, or one past its expiry (TTL deletion lags by up to days, so expiry is checked here).
 * Never an unfinished recoverable operation: it carries no expiry, and one written before that rule (with both) is
 * told apart by its place in the recovery index. Freeing it would start a new generation with a new downstream key
 * over a charge recovery has yet to record.
 */
export function freeCondition(now: number): Condition {
  return {
    ConditionExpression:
      'attribute_not_exists(#key) OR (#expiresAt <= :nowSeconds AND attribute_not_exists(#recoverAt))',
    ExpressionAttributeNames: { '#key': A.key, '#expiresAt': A.expiresAt, '#recoverAt': A.recoverAt },
    ExpressionAttributeValues: { ':nowSeconds': Math.floor(now / 1000) },
  };
}

/** The record is still exactly as we saw it: same lease token, same status. Of two writers, one wins. */
export function unchangedCondition(seen: IdempotencyRecord): Condition {
  return {
    ConditionExpression: '#leaseToken = :seenToken AND #status = :seenStatus',
    ExpressionAttributeNames: { '#leaseToken': A.leaseToken, '#status': A.status },
    ExpressionAttributeValues: { ':seenToken': seen.leaseToken, ':seenStatus': seen.status },
  };
}

/**
 * Take over a record whose owner is gone (lease ran out) or that was released: a new lease token and lease, one more
 * attempt, the fingerprint and downstream key kept. Conditioned on the record being as we saw it. A recoverable
 * operation is (again) in the recovery index, due when the new lease ends, and has no expiry; any other record
 * keeps one.
 */
export function takeOverUpdate(tableName: string, previous: IdempotencyRecord, next: IdempotencyRecord) {
  const condition = unchangedCondition(previous);
  const tracked = next.recoverAt !== undefined;
  const lifetime = tracked
    ? ', #recoveryShard = :shard, #recoverAt = :recoverAt REMOVE #expiresAt'
    : ', #expiresAt = :expiresAt';
  return {
    TableName: tableName,
    Key: { [A.key]: previous.key },
    UpdateExpression:
      'SET #status = :inProgress, #leaseToken = :newToken, #leaseExpiresAt = :leaseExpiresAt, ' +
      `#attempt = #attempt + :one${lifetime}`,
    ConditionExpression: condition.ConditionExpression,
    ExpressionAttributeNames: {
      ...condition.ExpressionAttributeNames,
      '#leaseExpiresAt': A.leaseExpiresAt,
      '#expiresAt': A.expiresAt,
      '#attempt': A.attempt,
      ...(tracked ? { '#recoveryShard': A.recoveryShard, '#recoverAt': A.recoverAt } : {}),
    },
    ExpressionAttributeValues: {
      ...condition.ExpressionAttributeValues,
      ':inProgress': RecordStatus.InProgress,
      ':newToken': next.leaseToken,
      ':leaseExpiresAt': next.leaseExpiresAt,
      ':one': 1,
      ...(tracked
        ? { ':shard': recoveryShardOf(next.key), ':recoverAt': next.recoverAt }
        : { ':expiresAt': next.expiresAt }),
    },
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const,
  };
}

/**
 * The record's completion: the stored response, a new expiry, out of the recovery index. Fencing: only the current
 * owner, only once. The same update is a transaction's last action (with effects) or a request of its own (without).
 */
export function completionUpdate(
  tableName: string,
  lease: Lease,
  response: StoredResponse,
  now: number,
  expiresAt: number,
) {
  return {
    TableName: tableName,
    Key: { [A.key]: lease.key },
    UpdateExpression:
      'SET #status = :completed, #response = :response, #completedAt = :now, #expiresAt = :expiresAt ' +
      'REMOVE #recoveryShard, #recoverAt',
    ConditionExpression: '#leaseToken = :token AND #status = :inProgress',
    ExpressionAttributeNames: {
      '#status': A.status,
      '#response': A.response,
      '#completedAt': A.completedAt,
      '#expiresAt': A.expiresAt,
      '#leaseToken': A.leaseToken,
      '#recoveryShard': A.recoveryShard,
      '#recoverAt': A.recoverAt,
    },
    ExpressionAttributeValues: {
      ':completed': RecordStatus.Completed,
      ':inProgress': RecordStatus.InProgress,
      ':response': response,
      ':now': now,
      ':expiresAt': expiresAt,
      ':token': lease.leaseToken,
    },
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const,
  };
}

/**
 * Ends this owner's lease with a new status (released, abandoned), setting and removing the given attributes.
 * Conditioned on still owning the record in progress.
 */
export function endLeaseUpdate(
  tableName: string,
  lease: Lease,
  status: RecordStatus,
  change: { set: Record<string, number | string>; remove: readonly string[]; now: number },
) {
  const names: Record<string, string> = {
    '#status': A.status,
    '#leaseExpiresAt': A.leaseExpiresAt,
    '#leaseToken': A.leaseToken,
  };
  const values: Record<string, unknown> = {
    ':status': status,
    ':inProgress': RecordStatus.InProgress,
    ':now': change.now,
    ':token': lease.leaseToken,
  };
  const sets = ['#status = :status', '#leaseExpiresAt = :now'];
  for (const [attribute, value] of Object.entries(change.set)) {
    names[`#${attribute}`] = attribute;
    values[`:${attribute}`] = value;
    sets.push(`#${attribute} = :${attribute}`);
  }
  for (const attribute of change.remove) names[`#${attribute}`] = attribute;
  const removes = change.remove.length > 0 ? ` REMOVE ${change.remove.map((a) => `#${a}`).join(', ')}` : '';
  return {
    TableName: tableName,
    Key: { [A.key]: lease.key },
    UpdateExpression: `SET ${sets.join(', ')}${removes}`,
    ConditionExpression: '#leaseToken = :token AND #status = :inProgress',
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: values,
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const,
  };
}

/**
 * A recovery point: the operation's steps at their new revision. Fencing: only the current owner, in progress, and
 * only from the revision this checkpoint follows, so one sent again after its reply was lost (or a step's effects
 * replayed) meets its own revision instead of writing twice. Nothing else of the record changes.
 */
export function checkpointUpdate(tableName: string, lease: Lease, progress: StepProgress) {
  const previous = progress.revision - 1;
  return {
    TableName: tableName,
    Key: { [A.key]: lease.key },
    UpdateExpression: 'SET #steps = :steps, #stepRevision = :revision',
    ConditionExpression:
      '#leaseToken = :token AND #status = :inProgress AND ' +
      (previous === 0 ? 'attribute_not_exists(#stepRevision)' : '#stepRevision = :previous'),
    ExpressionAttributeNames: {
      '#steps': A.steps,
      '#stepRevision': A.stepRevision,
      '#leaseToken': A.leaseToken,
      '#status': A.status,
    },
    ExpressionAttributeValues: {
      ':steps': JSON.stringify(progress.steps),
      ':revision': progress.revision,
      ':token': lease.leaseToken,
      ':inProgress': RecordStatus.InProgress,
      ...(previous === 0 ? {} : { ':previous': previous }),
    },
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const,
  };
}
