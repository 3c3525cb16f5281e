import {
  BatchProcessor,
  EventType,
  processPartialResponse,
  SqsFifoPartialProcessorAsync,
} from '@aws-lambda-powertools/batch';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { ConfigurationError } from '../engine/errors';
import type { IdempotencyStore } from '../engine/store';
import { RecordFencedError, RecordInFlightError, RecordMismatchError } from './errors';
import { recordIdentity } from './identity';
import { type ProcessRecordOptions, processIdentifiedRecord, type RecordOutcome } from './process-record';

/** Where the handler reports records it sends back to the queue. Powertools' Logger and `console` both fit. */
export interface SqsLogger {
  warn(message: string, details: Record<string, unknown>): void;
  error(message: string, details: Record<string, unknown>): void;
}

export interface SqsIdempotentHandlerOptions<TSummary> extends Omit<ProcessRecordOptions<TSummary>, 'lambdaContext'> {
  readonly store: IdempotencyStore;
  /**
   * What to do with a mismatch (a key that comes back with another body; only with `fingerprintBody`).
   * `fail` (default): the message goes back to the queue and, after maxReceiveCount, to the DLQ, where a person can
   * see both bodies. `acknowledge`: log it and drop it, for queues without a DLQ (where failing would loop it until
   * the record expires and it then runs as new work).
   */
  readonly onMismatch?: 'fail' | 'acknowledge';
  /**
   * Standard queues: run the batch's records concurrently (default true; records that share a key still run one
   * after the other). FIFO queues always run in order.
   */
  readonly processInParallel?: boolean;
  /**
   * Powertools' default (true): when every record fails, throw instead of returning them all as failures. SQS
   * retries the batch either way; the error makes Lambda back off polling and shows in the Errors metric, which is
   * what you want when everything fails at once (a downstream outage). Set false if single-record batches whose
   * only record is in flight should not count as function errors.
   */
  readonly throwOnFullBatchFailure?: boolean;
  /** Default `console`. */
  readonly logger?: SqsLogger;
}

/** A Lambda handler for an SQS event source mapping with `ReportBatchItemFailures` turned on. */
export type SqsIdempotentHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

/**
 * Turns an at-least-once queue into exactly-once effects: each record is claimed under its key, its function runs
 * once, and the DynamoDB writes it stages commit with the key's completion in one transaction. The event source
 * mapping must have `ReportBatchItemFailures` on; the handler answers with the records to redeliver:
 *
 * - acknowledged: committed now, or a replay of a key already completed (the function does not run again);
 * - sent back: the function threw (the key is released, keeping its downstream key), another consumer holds the key
 *   (`in_flight`: the original may still fail), the commit was fenced, or a mismatch (see `onMismatch`);
 * - FIFO queues (`.fifo` source): after a failure in a message group, the group's later records are sent back
 *   without running, so the group's order holds; other groups go on (Powertools' `skipGroupOnError`).
 *
 * Sizing: the store's lease (`leaseSeconds`) above the function's timeout, so a consumer that is still working
 * never loses its key; the queue's visibility timeout above the lease, so the redelivery after a crash finds the
 * lease run out and takes over, rather than going back to the queue again and spending a receive (maxReceiveCount).
 *
 * @example
 * const store = new IdempotencyStore({ client, tableName: config.idempotencyTable, leaseSeconds: 60 });
 *
 * export const handler = makeSqsIdempotentHandler({
 *   store,
 *   name: 'orders-fulfilment',
 *   key: byBodyField('orderId'),
 *   process: async (record, ctx) => {
 *     const order = parseOrder(record.body);
 *     const shipment = await carrier.book(order, { idempotencyKey: ctx.downstreamKey });
 *     ctx.stage({ Put: { TableName: config.ordersTable, Item: shippedRow(order, shipment) } });
 *     return { shipmentId: shipment.id };
 *   },
 * });
 * // or, with middy: export const handler = middy(makeSqsIdempotentHandler({ ... })).use(...);
 */
export function makeSqsIdempotentHandler<TSummary>(
  options: SqsIdempotentHandlerOptions<TSummary>,
): SqsIdempotentHandler {
  const settings = validated(options);

  return async function handleSqsBatch(event, context) {
    // Records that share a key run one after the other: the second then replays the first's result instead of
    // finding it in flight and going back to the queue. Other records run as the processor schedules them.
    const tails = new Map<string, Promise<unknown>>();

    function outcomeOf(record: SQSRecord): Promise<RecordOutcome<TSummary>> {
      const identity = recordIdentity(record, settings);
      const run = () =>
        processIdentifiedRecord(settings.store, record, identity, {
          ...settings,
          lambdaContext: context,
          inFlightWaitMs: boundedWait(settings.inFlightWaitMs, context),
        });
      const previous = tails.get(identity.key);
      const outcome = previous ? previous.then(run) : run();
      tails.set(
        identity.key,
        outcome.catch(() => undefined),
      );
      return outcome;
    }

    async function handleRecord(record: SQSRecord): Promise<void> {
      let outcome: RecordOutcome<TSummary>;
      try {
        outcome = await outcomeOf(record);
      } catch (error) {
        // No usable key, or the store unreachable: nothing was claimed, so nothing to release.
        settings.logger.error('record could not be processed; sent back to the queue', {
          messageId: record.messageId,
          consumer: settings.name,
          error: error instanceof Error ? error.message : String(error),
        });
        throw error;
      }
      settle(outcome, record, settings);
    }

    // A processor per invocation: Powertools keeps a batch's state on the processor instance (outside Lambda's
    // multi-concurrency mode), so a shared one would mix two concurrent invocations of this handler.
    // An event source mapping reads one queue, so the first record's source speaks for the batch.
    const fifo = event.Records[0]?.eventSourceARN.endsWith('.fifo') ?? false;
    const { throwOnFullBatchFailure } = settings;
    return fifo
      ? processPartialResponse(event, handleRecord, new SqsFifoPartialProcessorAsync(), {
          context,
          skipGroupOnError: true,
          throwOnFullBatchFailure,
        })
      : processPartialResponse(event, handleRecord, new BatchProcessor(EventType.SQS), {
          context,
          processInParallel: settings.processInParallel,
          throwOnFullBatchFailure,
        });
  };
}

type Defaulted = 'onMismatch' | 'processInParallel' | 'throwOnFullBatchFailure' | 'logger' | 'inFlightWaitMs';
type Settings<TSummary> = SqsIdempotentHandlerOptions<TSummary> &
  Required<Pick<SqsIdempotentHandlerOptions<TSummary>, Defaulted>>;

function validated<TSummary>(options: SqsIdempotentHandlerOptions<TSummary>): Settings<TSummary> {
  if (!options.name) throw new ConfigurationError('an SQS consumer needs a name: its keys are scoped to it');
  if (options.scope !== undefined && options.scope.length === 0) {
    throw new ConfigurationError('scope, when given, must not be empty');
  }
  if (options.inFlightWaitMs !== undefined && !(options.inFlightWaitMs >= 0)) {
    throw new ConfigurationError(`inFlightWaitMs must be 0 or more, got ${options.inFlightWaitMs}`);
  }
  return {
    ...options,
    onMismatch: options.onMismatch ?? 'fail',
    processInParallel: options.processInParallel ?? true,
    throwOnFullBatchFailure: options.throwOnFullBatchFailure ?? true,
    logger: options.logger ?? console,
    inFlightWaitMs: options.inFlightWaitMs ?? 0,
  };
}

/** Never wait past the point where the invocation could no longer finish the record it waited for. */
function boundedWait(waitMs: number, context: Context | undefined): number {
  if (waitMs === 0 || typeof context?.getRemainingTimeInMillis !== 'function') return waitMs;
  return Math.max(0, Math.min(waitMs, context.getRemainingTimeInMillis() / 2));
}

/** Acknowledge (return) or send back to the queue (throw, which is how Powertools' processor fails a record). */
function settle<TSummary>(outcome: RecordOutcome<TSummary>, record: SQSRecord, settings: Settings<TSummary>): void {
  const details = { messageId: record.messageId, key: outcome.key, consumer: settings.name };
  switch (outcome.kind) {
    case 'committed':
    case 'replay':
      return;
    case 'in_flight':
      settings.logger.warn('record in flight elsewhere; sent back to the queue', details);
      throw new RecordInFlightError(outcome.key, outcome.retryAfterMs);
    case 'mismatch':
      settings.logger.error('key reused with a different body', { ...details, onMismatch: settings.onMismatch });
      if (settings.onMismatch === 'acknowledge') return;
      throw new RecordMismatchError(outcome.key);
    case 'fenced':
      settings.logger.warn('lease taken over before the commit; nothing written, sent back', details);
      throw new RecordFencedError(outcome.key, { cause: outcome.error });
    case 'failed':
      settings.logger.error('record failed; sent back to the queue', {
        ...details,
        released: outcome.released,
        error: outcome.error instanceof Error ? outcome.error.message : String(outcome.error),
      });
      throw outcome.error instanceof Error ? outcome.error : new Error(String(outcome.error));
  }
}
