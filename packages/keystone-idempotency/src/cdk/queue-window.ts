import { Annotations, type Duration, Token } from 'aws-cdk-lib';
import { type CfnQueue, type IQueue, Queue } from 'aws-cdk-lib/aws-sqs';
import type { IConstruct } from 'constructs';
import { DEFAULT_TTL_SECONDS } from '../engine/contract.js';
import { ConfigurationError } from '../engine/errors.js';

/** SQS's defaults, for a queue whose props leave them out (CloudFormation then leaves them out too). */
const SQS_DEFAULT_VISIBILITY_SECONDS = 30;
const SQS_DEFAULT_RETENTION_SECONDS = 4 * 24 * 60 * 60;

export interface QueueWindowOptions {
  /** The queue an idempotent consumer (`makeSqsIdempotentHandler`) reads. */
  readonly queue: IQueue;
  /** The store's TTL (its `ttlSeconds`): how long a key is remembered. Default the stores' default, 24 hours. */
  readonly ttl?: Duration;
}

/** How long the same message can come back, in seconds, as far as the queue's settings tell. */
export interface QueueWindow {
  /**
   * SQS's own redeliveries: a message whose deletion never happened (a batch failure, a timeout after the commit)
   * comes back every visibility timeout until the redrive policy moves it, after `maxReceiveCount` receives, or,
   * with no redrive policy, until the queue's retention period ends.
   */
  readonly redeliverySeconds: number;
  /** A redrive from the dead-letter queue can bring it back while the DLQ keeps it: its retention period. */
  readonly redriveSeconds?: number;
}

/**
 * Checks, at synth, an idempotent consumer's TTL against the time its queue can deliver the same message again. A
 * message that comes back after its key expired finds no record, is claimed as new work and runs a second time.
 *
 * - Refuses (throws {@link ConfigurationError}) a TTL shorter than SQS's own redelivery window: the queue's
 *   visibility timeout times its redrive policy's `maxReceiveCount` (capped by its retention period), or its
 *   retention period when it has no redrive policy.
 * - Warns (`Annotations.addWarningV2`, `keystone-idempotency:ttlShorterThanDeadLetterRetention`) when the TTL is
 *   shorter than the dead-letter queue's retention period: redriving a message from the DLQ later than the TTL runs
 *   it again. Acknowledge the warning if your runbook never redrives older messages.
 * - Warns (`keystone-idempotency:queueWindowUnknown`) when it can't tell: an imported queue or DLQ, or a setting
 *   that is a token.
 *
 * The window counts from the message's send, the TTL from the key's commit (later), so the check errs on the safe
 * side. `IdempotencyTable.checkQueueWindow` is this for the DynamoDB store's table; on PostgreSQL, call this.
 *
 * @example
 * checkQueueWindow(stack, { queue: orders, ttl: Duration.days(4) });
 */
export function checkQueueWindow(scope: IConstruct, options: QueueWindowOptions): QueueWindow | undefined {
  const { queue } = options;
  const ttlSeconds = options.ttl?.toSeconds() ?? DEFAULT_TTL_SECONDS;
  const unknown = (why: string) => {
    Annotations.of(scope).addWarningV2(
      'keystone-idempotency:queueWindowUnknown',
      `Can't check the idempotency TTL against ${queue.node.path}: ${why}. Keep the TTL (the store's ttlSeconds) ` +
        "at least its visibility timeout x maxReceiveCount, and the dead-letter queue's retention period.",
    );
    return undefined;
  };
  if (Token.isUnresolved(ttlSeconds)) return unknown('the TTL is a token');
  const settings = queueSettings(queue);
  if (!settings) return unknown('an imported queue, or its visibility timeout or retention period is a token');
  const deadLetter = queue instanceof Queue ? queue.deadLetterQueue : undefined;
  const redeliverySeconds = deadLetter
    ? Math.min(settings.retentionSeconds, settings.visibilitySeconds * deadLetter.maxReceiveCount)
    : settings.retentionSeconds;
  if (ttlSeconds < redeliverySeconds) {
    const how = deadLetter
      ? `visibility timeout ${settings.visibilitySeconds}s x maxReceiveCount ${deadLetter.maxReceiveCount}`
      : 'its retention period: with no redrive policy a message comes back until then; a dead-letter queue bounds it';
    throw new ConfigurationError(
      `The idempotency TTL (${ttlSeconds}s) is shorter than the ${redeliverySeconds}s in which ${queue.node.path} can ` +
        `deliver the same message again (${how}): a message delivered after its key expired runs a second time. ` +
        `Make the store's ttlSeconds at least ${redeliverySeconds}, or shorten the queue's window.`,
    );
  }
  if (!deadLetter) return { redeliverySeconds };
  const deadLetterSettings = queueSettings(deadLetter.queue);
  if (!deadLetterSettings) {
    unknown(`its dead-letter queue's retention period is unknown (imported, or a token)`);
    return { redeliverySeconds };
  }
  const redriveSeconds = deadLetterSettings.retentionSeconds;
  if (ttlSeconds < redriveSeconds) {
    Annotations.of(scope).addWarningV2(
      'keystone-idempotency:ttlShorterThanDeadLetterRetention',
      `The idempotency TTL (${ttlSeconds}s) is shorter than the retention period (${redriveSeconds}s) of ` +
        `${deadLetter.queue.node.path}, the dead-letter queue of ${queue.node.path}: a message redriven from it ` +
        "after its key expired runs a second time. Make the store's ttlSeconds at least the DLQ's retention, or " +
        'never redrive messages older than the TTL.',
    );
  }
  return { redeliverySeconds, redriveSeconds };
}

/** A queue's visibility timeout and retention period, or undefined when synth can't know them. */
function queueSettings(queue: IQueue): { visibilitySeconds: number; retentionSeconds: number } | undefined {
  if (!(queue instanceof Queue)) return undefined; // imported: its settings live elsewhere
  const resource = queue.node.defaultChild as CfnQueue;
  const visibilitySeconds = resource.visibilityTimeout ?? SQS_DEFAULT_VISIBILITY_SECONDS;
  const retentionSeconds = resource.messageRetentionPeriod ?? SQS_DEFAULT_RETENTION_SECONDS;
  if (Token.isUnresolved(visibilitySeconds) || Token.isUnresolved(retentionSeconds)) return undefined;
  return { visibilitySeconds, retentionSeconds };
}
