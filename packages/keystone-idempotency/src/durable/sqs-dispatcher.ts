import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import canonicalize from 'canonicalize';
import { selectedKey } from '../engine/fingerprint.js';
import { scopedKey } from '../engine/key.js';
import { InvalidRecordKeyError } from '../sqs/errors.js';
import { byMessageId, type RecordKeySource } from '../sqs/record-key.js';
import { ExecutionNameTakenError } from './errors.js';
import { executionName } from './execution-name.js';
import type { DurableExecutions } from './executions.js';

/** What a durable function started by {@link makeSqsDurableDispatcher} receives as its event. */
export interface DispatchedRecord<TInput = unknown> {
  readonly input: TInput;
  /** The record's key, scoped to the dispatcher's name: the same for every delivery of the message. */
  readonly key: string;
}

export interface SqsDurableDispatcherOptions {
  readonly executions: DurableExecutions;
  /** The operation the keys belong to (`orders-approval`): one key under two dispatchers is two executions. */
  readonly name: string;
  /** The record's idempotency key. Default the message id; a business key from the body: `byBodyField('orderId')`. */
  readonly key?: RecordKeySource;
  /**
   * What the execution is started with. Default the body, parsed as JSON. Lambda compares a later start's payload
   * with the first one's: select only what a re-sent message repeats (not its timestamp) when the key is a business key.
   */
  readonly input?: (record: SQSRecord) => unknown;
  readonly logger?: { warn(message: string, details: Record<string, unknown>): void };
}

/**
 * The dispatcher AWS's documentation recommends for durable functions behind a queue: an event source mapping does
 * not dedupe durable executions (each delivery would start one), so a plain function takes the batch and starts one
 * execution per record, named from the record's key (`executionName`). A redelivered record starts nothing new:
 * Lambda answers the execution it already has under that name and payload. With `ReportBatchItemFailures` on, a
 * record whose start failed (Lambda unreachable, throttled) is reported alone and comes back; one with no usable key,
 * or whose key already names an execution with another payload, fails too, and its redrive policy moves it aside.
 *
 * The dedupe lasts as long as Lambda keeps the execution: its `retentionPeriod` (1 to 90 days) after it closes. Keep
 * that at least the queue's redelivery window (visibility timeout x maxReceiveCount, and the DLQ's retention if you
 * redrive), as for a store's TTL.
 *
 * @example
 * export const handler = makeSqsDurableDispatcher({ executions, name: 'orders-approval', key: byBodyField('orderId') });
 */
export function makeSqsDurableDispatcher(
  options: SqsDurableDispatcherOptions,
): (event: SQSEvent, context: Context) => Promise<SQSBatchResponse> {
  const keyOf = options.key ?? byMessageId;
  const inputOf = options.input ?? ((record: SQSRecord) => JSON.parse(record.body) as unknown);
  const logger = options.logger ?? console;

  async function dispatch(record: SQSRecord): Promise<string> {
    let key: string;
    let payload: string;
    try {
      const own = selectedKey(keyOf(record));
      if (own === undefined) throw new Error('the key source selected nothing');
      key = scopedKey({ accountId: 'sqs', operation: options.name, key: own });
      const message: DispatchedRecord = { input: inputOf(record), key };
      payload = canonicalize(message) ?? '';
    } catch (error) {
      throw new InvalidRecordKeyError(record.messageId, error instanceof Error ? error.message : String(error), {
        cause: error,
      });
    }
    const name = executionName(key);
    try {
      const { executionArn } = await options.executions.start({ name, payload });
      return executionArn;
    } catch (error) {
      if (!(error instanceof ExecutionNameTakenError)) throw error;
      logger.warn('the record key already names an execution started with another payload', {
        messageId: record.messageId,
        key,
        executionName: name,
      });
      throw error;
    }
  }

  return async function sqsDurableDispatcher(event, context) {
    return processPartialResponse(event, dispatch, new BatchProcessor(EventType.SQS), { context });
  };
}
