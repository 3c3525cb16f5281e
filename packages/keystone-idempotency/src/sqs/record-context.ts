import type { Context, SQSRecord } from 'aws-lambda';
import type { IdempotencyHandle } from '../engine/operation.js';
import type { Lease } from '../engine/record.js';

/**
 * What the record function sees besides the record: the operation's handle (the engine's, as every adapter gives
 * it: `key`, `downstreamKey`, `attempt`, `stage(...items)`), and the delivery it runs for.
 */
export interface SqsRecordContext<TEffect> extends IdempotencyHandle<TEffect> {
  readonly record: SQSRecord;
  /** SQS's ApproximateReceiveCount for this delivery. */
  readonly receiveCount: number;
  readonly lease: Lease;
  /** The Lambda context of the invocation, when there is one. */
  readonly lambdaContext: Context | undefined;
}
