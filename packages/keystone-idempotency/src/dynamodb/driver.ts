import { createHash } from 'node:crypto';
import { IdempotentParameterMismatchException, TransactionConflictException } from '@aws-sdk/client-dynamodb';
import {
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { MAX_CLAIM_ROUNDS } from '../engine/contract.js';
import type { ClaimWriteOutcome, IdempotencyDriver, WriteOutcome } from '../engine/driver.js';
import { ContendedError, EffectConditionFailedError, LeaseLostError } from '../engine/errors.js';
import { sleep } from '../engine/ownership.js';
import type { IdempotencyRecord } from '../engine/record.js';
import type { StepProgress } from '../engine/steps.js';
import { fromItem, toItem } from './codec.js';
import { checkTransactionItem, type EffectItem } from './effect-item.js';
import {
  checkpointUpdate,
  completionUpdate,
  endLeaseUpdate,
  freeCondition,
  takeOverUpdate,
  unchangedCondition,
} from './expressions.js';
import { RecordAttribute as A } from './layout.js';
import { dueOperations, recoveryShardOf } from './recovery-index.js';
import { conditionFailure, type TransactionFailure, transactionFailure } from './write-errors.js';

const POLL_START_MS = 50;

/** What one item holds of response and progress together: 400 KB, less room for the record's own attributes. */
export const MAX_RECORD_PAYLOAD_BYTES = 380 * 1024;

/**
 * A checkpoint's ClientRequestToken (at most 36 characters): one per lease and revision, so a retry of the same
 * checkpoint is the same request, and the next checkpoint a new one.
 */
function checkpointToken(leaseToken: string, progress: StepProgress): string {
  return createHash('sha256').update(`${leaseToken}:${progress.revision}`).digest('hex').slice(0, 36);
}

/**
 * The protocol's writes on DynamoDB: each a conditional PutItem or UpdateItem that returns the item it met
 * (`ALL_OLD`) when its condition fails, or a TransactWriteItems whose last action is the record's own write. The
 * engine's `DriverStore` decides which to send; `DynamoDbStore` is that store over this driver.
 *
 * @internal the package's own DynamoDB store uses it; not exported by the package
 */
export class DynamoDbDriver implements IdempotencyDriver<EffectItem> {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    readonly tableName: string,
    readonly maxResponseBytes: number,
    readonly maxEffects: number,
    readonly maxCheckpointBytes: number,
  ) {}

  /** One item holds the response and the progress together: 400 KB, less the record's other attributes. */
  readonly maxRecordBytes = MAX_RECORD_PAYLOAD_BYTES;

  checkEffect(effect: unknown, index: number): void {
    checkTransactionItem(effect, index);
  }

  async read(key: string): Promise<IdempotencyRecord | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: { [A.key]: key }, ConsistentRead: true }),
    );
    return Item ? fromItem(Item) : undefined;
  }

  /** One conditional PutItem: a fresh key costs one request, and a duplicate learns the record from the same one. */
  async putFresh({ record, now }: { record: IdempotencyRecord; now: number }): Promise<ClaimWriteOutcome> {
    try {
      await this.client.send(
        new PutCommand({
          TableName: this.tableName,
          Item: toItem(record),
          ...freeCondition(now),
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { kind: 'written' };
    } catch (error) {
      return this.metAfterFailedWrite(record.key, error);
    }
  }

  /**
   * One UpdateItem naming the lease token we saw, so of two concurrent takeovers exactly one wins; the fingerprint
   * and downstream key are kept, so an effect the dead owner may have made elsewhere is found again under the same
   * key, not repeated.
   */
  async takeOver({ previous, record }: { previous: IdempotencyRecord; record: IdempotencyRecord }) {
    try {
      await this.client.send(new UpdateCommand(takeOverUpdate(this.tableName, previous, record)));
      return { kind: 'written' } as const;
    } catch (error) {
      return this.metAfterFailedWrite(previous.key, error);
    }
  }

  /**
   * The caller's effect items and the record's completion in one TransactWriteItems, or, with no effect items, the
   * completion alone as one conditional UpdateItem: one write unit instead of two, and no transaction.
   */
  async commit({ lease, response, effects, now, expiresAt }: Parameters<IdempotencyDriver<EffectItem>['commit']>[0]) {
    const completion = completionUpdate(this.tableName, lease, response, now, expiresAt);
    if (effects.length === 0) return this.complete(lease.key, completion);
    // The lease token doubles as the transaction's ClientRequestToken, so a commit whose reply was lost can be
    // called again by the caller: the same request is answered with success, not a failed (satisfied) condition.
    try {
      await this.transact(lease.key, [...effects, { Update: completion }], lease.leaseToken);
      return { kind: 'written' } as const;
    } catch (error) {
      // Sent again after DynamoDB forgot the token (10 minutes): the record's condition fails against the completion
      // our first call wrote, and the effects' against their own rows. The engine recognises it as ours.
      if (error instanceof LeaseLostError) return { kind: 'met', record: error.record, cause: error.cause } as const;
      if (!(error instanceof IdempotentParameterMismatchException)) throw error;
      // The token was used within the last 10 minutes with other parameters (a later completedAt): the first call
      // landed if the record is completed under our lease; anything else means we lost it.
      return { kind: 'met', record: await this.read(lease.key) } as const;
    }
  }

  /**
   * A recovery point: the progress alone as one conditional UpdateItem, or with the step's effect items as one
   * TransactWriteItems whose last action it is. The transaction's ClientRequestToken is derived from the lease token
   * and the revision, so the SDK's retry of a transaction whose reply was lost is answered as the first was; after
   * DynamoDB forgot the token (10 minutes), the revision's condition fails against our own checkpoint, which the
   * engine recognises.
   */
  async checkpoint({
    lease,
    progress,
    effects,
  }: Parameters<NonNullable<IdempotencyDriver<EffectItem>['checkpoint']>>[0]): Promise<WriteOutcome> {
    const update = checkpointUpdate(this.tableName, lease, progress);
    if (effects.length === 0) return this.complete(lease.key, update);
    try {
      await this.transact(lease.key, [...effects, { Update: update }], checkpointToken(lease.leaseToken, progress));
      return { kind: 'written' } as const;
    } catch (error) {
      if (error instanceof LeaseLostError) return { kind: 'met', record: error.record, cause: error.cause } as const;
      if (!(error instanceof IdempotentParameterMismatchException)) throw error;
      return { kind: 'met', record: await this.read(lease.key) } as const;
    }
  }

  /** One conditional UpdateItem; a lost reply that the SDK retried meets the record our first attempt wrote. */
  async endLease({
    lease,
    status,
    now,
    recoverAt,
    expiresAt,
  }: Parameters<IdempotencyDriver<EffectItem>['endLease']>[0]): Promise<WriteOutcome> {
    const set: Record<string, number | string> = {};
    const remove: string[] = [];
    // In the recovery set means a recoverAt and its shard (the sparse index's keys); out of it, neither.
    if (recoverAt === null) remove.push(A.recoverAt, A.recoveryShard);
    else if (recoverAt !== undefined)
      Object.assign(set, { [A.recoverAt]: recoverAt, [A.recoveryShard]: recoveryShardOf(lease.key) });
    if (expiresAt === null) remove.push(A.expiresAt);
    else if (expiresAt !== undefined) set[A.expiresAt] = expiresAt;
    try {
      await this.client.send(new UpdateCommand(endLeaseUpdate(this.tableName, lease, status, { set, remove, now })));
      return { kind: 'written' };
    } catch (error) {
      const failed = conditionFailure(error);
      if (!failed) throw error;
      return { kind: 'met', record: failed.record, cause: error };
    }
  }

  /**
   * Claim, effects and completion in one TransactWriteItems: a first request costs one round trip; a duplicate learns
   * the stored record from the cancellation reasons of that same request.
   */
  async commitOneShot({
    record,
    previous,
    effects,
    now,
  }: Parameters<IdempotencyDriver<EffectItem>['commitOneShot']>[0]): Promise<WriteOutcome> {
    const put: EffectItem = {
      Put: {
        TableName: this.tableName,
        Item: toItem(record),
        ...(previous ? unchangedCondition(previous) : freeCondition(now)),
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      },
    };
    try {
      await this.transact(record.key, [...effects, put], record.leaseToken);
      return { kind: 'written' };
    } catch (error) {
      if (!(error instanceof LeaseLostError)) throw error;
      return { kind: 'met', record: error.record };
    }
  }

  /** The sparse recovery index, one query per shard, never the table. Eventually consistent. */
  findDue({ now, limit }: { now: number; limit: number }) {
    return dueOperations(this.client, this.tableName, now, limit);
  }

  /**
   * The completion on its own: one conditional UpdateItem. An UpdateItem has no ClientRequestToken; its condition
   * does the same job. When the reply to an update that landed is lost, the SDK's retry (or the caller's second
   * commit) fails the condition against our own completion, and the record it returns (ALL_OLD) says so: completed
   * under our lease token, which no other owner ever holds.
   */
  private async complete(
    key: string,
    completion: ReturnType<typeof completionUpdate> | ReturnType<typeof checkpointUpdate>,
  ): Promise<WriteOutcome> {
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      try {
        await this.client.send(new UpdateCommand(completion));
        return { kind: 'written' };
      } catch (error) {
        if (error instanceof TransactionConflictException) {
          // A transaction on the record is under way (a duplicate's claimAndCommit): nothing was written; again.
          await sleep(POLL_START_MS * (round + 1));
          continue;
        }
        const failed = conditionFailure(error);
        if (!failed) throw error;
        return { kind: 'met', record: failed.record, cause: error };
      }
    }
    throw new ContendedError(key);
  }

  private async metAfterFailedWrite(key: string, error: unknown): Promise<ClaimWriteOutcome> {
    const failed = conditionFailure(error);
    // The item can be absent from the error if it vanished (TTL deletion) between the check and the reply.
    if (failed) return { kind: 'met', record: failed.record };
    if (error instanceof TransactionConflictException) {
      // A transaction on this item is under way: look again shortly.
      await sleep(POLL_START_MS);
      return { kind: 'met', record: await this.read(key) };
    }
    throw error;
  }

  /**
   * One TransactWriteItems whose last item is the record's own write. A failed record condition is a
   * {@link LeaseLostError} carrying the record met; a failed effect condition an {@link EffectConditionFailedError};
   * a conflict with another transaction is sent again (nothing was written).
   */
  private async transact(key: string, items: EffectItem[], clientRequestToken: string): Promise<void> {
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      try {
        await this.client.send(
          new TransactWriteCommand({ TransactItems: items, ClientRequestToken: clientRequestToken }),
        );
        return;
      } catch (error) {
        const failure: TransactionFailure | undefined = transactionFailure(error, items.length - 1);
        switch (failure?.kind) {
          case 'record':
            throw new LeaseLostError(key, failure.record, { cause: error });
          case 'effect':
            throw new EffectConditionFailedError(failure.index, failure.item, { cause: error });
          case 'conflict':
            await sleep(POLL_START_MS * (round + 1));
            continue;
          case undefined:
            throw error;
        }
      }
    }
    throw new ContendedError(key);
  }
}
