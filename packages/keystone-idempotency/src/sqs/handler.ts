import {
  BatchProcessor,
  EventType,
  FullBatchFailureError,
  processPartialResponse,
  SqsFifoPartialProcessorAsync,
} from '@aws-lambda-powertools/batch';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { type Clock, systemClock } from '../engine/clock.js';
import type { IdempotencyStore } from '../engine/contract.js';
import { ConfigurationError } from '../engine/errors.js';
import {
  DeadLetterError,
  InvalidRecordKeyError,
  RecordFencedError,
  RecordInFlightError,
  RecordMismatchError,
  RetryLaterError,
} from './errors.js';
import { recordIdentity } from './identity.js';
import { type ProcessRecordOptions, processIdentifiedRecord, type RecordOutcome } from './process-record.js';

/** Where the handler reports records it sends back to the queue. Powertools' Logger and `console` both fit. */
export interface SqsLogger {
  /** Expected waits (a record sent back to come again shortly). Falls back to `warn` when absent. */
  info?(message: string, details: Record<string, unknown>): void;
  warn(message: string, details: Record<string, unknown>): void;
  error(message: string, details: Record<string, unknown>): void;
}

/**
 * What the handler needs of an `SQSClient` (from `@aws-sdk/client-sqs`): to send it ChangeMessageVisibility and
 * SendMessage commands. Declared here rather than imported from the SDK, so the adapter's declarations compile in a
 * project without `@aws-sdk/client-sqs` installed; pass your `SQSClient`.
 */
export interface SqsCommandSender {
  send(command: object): Promise<unknown>;
}

/** The queue the handler consumes, for the actions a record can't express by failing alone. */
export interface SqsQueueAccess {
  readonly client: SqsCommandSender;
  /**
   * The queue's URL, for ChangeMessageVisibility (a record sent back to come again soon). Default: derived from the
   * record's ARN (`https://sqs.<region>.amazonaws.com/<account>/<name>`).
   */
  readonly url?: string;
  /**
   * The dead-letter queue's URL: records whose function throws {@link DeadLetterError}, and records with no usable
   * key ({@link InvalidRecordKeyError}), are moved there at once.
   */
  readonly deadLetterUrl?: string;
}

export interface SqsIdempotentHandlerOptions<TSummary, TEffect>
  extends Omit<ProcessRecordOptions<TSummary, TEffect>, 'lambdaContext'> {
  readonly store: IdempotencyStore<TEffect>;
  /**
   * What to do with a mismatch (a key that comes back with another body; only with `fingerprintBody` or
   * `fingerprint`).
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
  /**
   * Lets the handler act on the queue: send a record whose function threw {@link RetryLaterError}, or that another
   * consumer holds, back with a short visibility timeout (the function's role needs sqs:ChangeMessageVisibility,
   * which an SQS event source grants anyway), and move a {@link DeadLetterError} record to the dead-letter queue
   * (sqs:SendMessage on it). Without it such records simply fail and return after the queue's visibility timeout.
   */
  readonly queue?: SqsQueueAccess;
  /** What a record's `SentTimestamp` is compared with, to tell one older than the store's TTL. Default the system's. */
  readonly clock?: Clock;
}

/** A Lambda handler for an SQS event source mapping with `ReportBatchItemFailures` turned on. */
export type SqsIdempotentHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

/**
 * Turns an at-least-once queue into exactly-once effects: each record is claimed under its key, its function runs
 * once, and the writes it stages (the store's effects) commit with the key's completion in one transaction. The
 * event source mapping must have `ReportBatchItemFailures` on; the handler answers with the records to redeliver:
 *
 * - acknowledged: committed now, or a replay of a key already completed (the function does not run again);
 * - sent back: the function threw (the key is released, keeping its downstream key), another consumer holds the key
 *   (`in_flight`: the original may still fail), the commit was fenced, or a mismatch (see `onMismatch`);
 * - no usable key (an {@link InvalidRecordKeyError}: an unparsable body, an empty or too long key, or one a store
 *   can't keep as it is, with a NUL or a lone surrogate): never acknowledged, never run; moved to the dead-letter
 *   queue at once when `queue.deadLetterUrl` is given (it could never succeed), else sent back until SQS moves it;
 * - FIFO queues (`.fifo` source): after a failure in a message group, the group's later records are sent back
 *   without running, so the group's order holds; other groups go on (Powertools' `skipGroupOnError`).
 *
 * Under one key, the key alone decides by default: a delivery whose body differs is a replay, not a mismatch. Unlike
 * `makeIdempotent` (which compares the whole input), because a producer that sends the same event again re-renders
 * its body (a timestamp, a trace id), and a mismatch fails the record over and over into the dead-letter queue; with
 * the default key, the message id, a body can't differ anyway. `fingerprintBody` (the whole body, canonical JSON) or
 * `fingerprint` (a part of it) make another body under the key a mismatch (see `onMismatch`).
 *
 * Sizing: the store's lease (`leaseSeconds`) above the function's timeout, so a consumer that is still working
 * never loses its key; the queue's visibility timeout above the lease, so the redelivery after a crash finds the
 * lease run out and takes over, rather than going back to the queue again and spending a receive (maxReceiveCount).
 * And the store's TTL (`ttlSeconds`) at least as long as the queue can deliver a message again (visibility timeout x
 * maxReceiveCount, and the dead-letter queue's retention if you redrive from it): a message that comes back after its
 * key expired is claimed as new and runs a second time. `checkQueueWindow` (`keystone-idempotency/cdk`) checks it at
 * synth; at run time a record sent longer ago than the TTL still runs (it may never have run: dropping it could lose
 * the work), with a warning, `record older than the idempotency TTL`, naming its age and the TTL.
 *
 * @example
 * const store = new DynamoDbStore({ client, tableName: config.idempotencyTable, leaseSeconds: 60 });
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
export function makeSqsIdempotentHandler<TSummary, TEffect>(
  options: SqsIdempotentHandlerOptions<TSummary, TEffect>,
): SqsIdempotentHandler {
  const settings = validated(options);

  return async function handleSqsBatch(event, context) {
    // Records that share a key run one after the other: the second then replays the first's result instead of
    // finding it in flight and going back to the queue. Other records run as the processor schedules them.
    const tails = new Map<string, Promise<unknown>>();

    function outcomeOf(record: SQSRecord): Promise<RecordOutcome<TSummary>> {
      const identity = recordIdentity(record, settings);
      // The engine's lifecycle bounds the wait by the invocation's remaining time and makes the lease cover it.
      const run = () =>
        processIdentifiedRecord(settings.store, record, identity, { ...settings, lambdaContext: context });
      const previous = tails.get(identity.key);
      const outcome = previous ? previous.then(run) : run();
      tails.set(
        identity.key,
        outcome.catch(() => undefined),
      );
      return outcome;
    }

    /** Records sent back only to come again shortly: an expected wait, not a failure of the function. */
    const waiting = new Set<string>();
    const errors: Error[] = [];

    async function handleRecord(record: SQSRecord): Promise<void> {
      warnIfOlderThanTtl(record, settings);
      try {
        const outcome = await outcomeOrLog(record);
        if (outcome) await settle(outcome, record, settings, waiting);
      } catch (error) {
        errors.push(error instanceof Error ? error : new Error(String(error)));
        throw error;
      }
    }

    /** The record's outcome; undefined when it has no usable key and was moved to the dead-letter queue. */
    async function outcomeOrLog(record: SQSRecord): Promise<RecordOutcome<TSummary> | undefined> {
      try {
        return await outcomeOf(record);
      } catch (error) {
        // No usable key: every delivery would derive the same unusable key (a key source is a function of the record),
        // so, like a DeadLetterError, it goes to the dead-letter queue at once when the handler may send it there.
        // Never acknowledged otherwise: it fails on each receive until SQS's redrive moves it.
        if (error instanceof InvalidRecordKeyError && (await moveToDeadLetters(record, settings))) {
          settings.logger.error('record has no usable idempotency key; moved to the dead-letter queue', {
            messageId: record.messageId,
            consumer: settings.name,
            reason: error.message,
          });
          return undefined;
        }
        // No usable key, or the store unreachable: nothing was claimed, so nothing to release.
        settings.logger.error('record could not be processed; sent back to the queue', {
          messageId: record.messageId,
          consumer: settings.name,
          error: error instanceof Error ? error.message : String(error),
        });
        throw error;
      }
    }

    // A processor per invocation: Powertools keeps a batch's state on the processor instance (outside Lambda's
    // multi-concurrency mode), so a shared one would mix two concurrent invocations of this handler.
    // An event source mapping reads one queue, so the first record's source speaks for the batch.
    // Powertools' own full-batch check can't tell a wait from a failure, so it is done here instead.
    const fifo = event.Records[0]?.eventSourceARN.endsWith('.fifo') ?? false;
    const response = fifo
      ? await processPartialResponse(event, handleRecord, new SqsFifoPartialProcessorAsync(), {
          context,
          skipGroupOnError: true,
          throwOnFullBatchFailure: false,
        })
      : await processPartialResponse(event, handleRecord, new BatchProcessor(EventType.SQS), {
          context,
          processInParallel: settings.processInParallel,
          throwOnFullBatchFailure: false,
        });
    const failures = response.batchItemFailures;
    if (
      settings.throwOnFullBatchFailure &&
      event.Records.length > 0 &&
      failures.length === event.Records.length &&
      failures.some((failure) => !waiting.has(failure.itemIdentifier))
    ) {
      throw new FullBatchFailureError(errors);
    }
    return response;
  };
}

type Defaulted = 'onMismatch' | 'processInParallel' | 'throwOnFullBatchFailure' | 'logger' | 'inFlightWaitMs' | 'clock';
type Settings<TSummary, TEffect> = SqsIdempotentHandlerOptions<TSummary, TEffect> &
  Required<Pick<SqsIdempotentHandlerOptions<TSummary, TEffect>, Defaulted>>;

function validated<TSummary, TEffect>(
  options: SqsIdempotentHandlerOptions<TSummary, TEffect>,
): Settings<TSummary, TEffect> {
  if (!options.name) throw new ConfigurationError('an SQS consumer needs a name: its keys are scoped to it');
  if (options.scope !== undefined && options.scope.length === 0) {
    throw new ConfigurationError('scope, when given, must not be empty');
  }
  if (options.fingerprint && options.fingerprintBody) {
    throw new ConfigurationError('fingerprint and fingerprintBody both say what to compare: give one of them');
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
    clock: options.clock ?? systemClock,
  };
}

/**
 * A record sent longer ago than the store's TTL may have run already, its key since expired: it would then be
 * claimed as new and run a second time. Nothing here can tell whether it ran (its record is gone either way), and
 * dropping it could lose work that never ran, so it runs as any other, and this says so loudly: the queue can
 * deliver a message for longer than the TTL (see `checkQueueWindow`), or a message was redriven from a dead-letter
 * queue after it.
 */
function warnIfOlderThanTtl<TSummary, TEffect>(record: SQSRecord, settings: Settings<TSummary, TEffect>): void {
  const sentAt = Number(record.attributes.SentTimestamp);
  if (!Number.isFinite(sentAt)) return;
  const ageMs = settings.clock.now() - sentAt;
  const { ttlSeconds } = settings.store;
  if (ageMs <= ttlSeconds * 1000) return;
  const ageSeconds = Math.floor(ageMs / 1000);
  settings.logger.warn(
    'record older than the idempotency TTL: its key may have expired, so it may run a second time; the TTL must ' +
      "cover the queue's redelivery window and any redrive from its dead-letter queue",
    {
      messageId: record.messageId,
      consumer: settings.name,
      sentAt: new Date(sentAt).toISOString(),
      ageSeconds,
      ttlSeconds,
      receiveCount: Number(record.attributes.ApproximateReceiveCount),
    },
  );
}

/** Acknowledge (return) or send back to the queue (throw, which is how Powertools' processor fails a record). */
async function settle<TSummary, TEffect>(
  outcome: RecordOutcome<TSummary>,
  record: SQSRecord,
  settings: Settings<TSummary, TEffect>,
  waiting: Set<string>,
): Promise<void> {
  const details = { messageId: record.messageId, key: outcome.key, consumer: settings.name };
  if (outcome.kind === 'failed' && outcome.error instanceof RetryLaterError) {
    const seconds = await comeBackIn(record, outcome.error.afterMs, settings);
    (settings.logger.info ?? settings.logger.warn).call(settings.logger, 'record not ready; it will come back', {
      ...details,
      reason: outcome.error.message,
      afterSeconds: seconds,
    });
    waiting.add(record.messageId);
    throw outcome.error;
  }
  if (outcome.kind === 'failed' && outcome.error instanceof DeadLetterError) {
    if (await moveToDeadLetters(record, settings)) {
      settings.logger.error('record can never succeed; moved to the dead-letter queue', {
        ...details,
        reason: outcome.error.message,
      });
      return;
    }
    settings.logger.error('record can never succeed; sent back until SQS moves it to the dead-letter queue', {
      ...details,
      reason: outcome.error.message,
    });
    throw outcome.error;
  }
  switch (outcome.kind) {
    case 'committed':
    case 'replay':
      return;
    case 'in_flight': {
      // Back when the owner has finished (a replay then) or is gone (a takeover), not sooner: a record sent back
      // every second would spend its receives while the original still works, and reach the DLQ with nothing wrong.
      const afterMs = outcome.leaseRemainingMs;
      const seconds = await comeBackIn(record, afterMs, settings);
      (settings.logger.info ?? settings.logger.warn).call(
        settings.logger,
        'record in flight elsewhere; it comes back when its lease has run out',
        { ...details, afterSeconds: seconds },
      );
      waiting.add(record.messageId);
      throw new RecordInFlightError(outcome.key, afterMs, outcome.record);
    }
    case 'mismatch':
      settings.logger.error('key reused with a different body', { ...details, onMismatch: settings.onMismatch });
      if (settings.onMismatch === 'acknowledge') return;
      throw new RecordMismatchError(outcome.key, outcome.record);
    case 'fenced':
      settings.logger.warn('lease taken over before the commit; nothing written, sent back', details);
      throw new RecordFencedError(outcome.key, outcome.error.record, { cause: outcome.error });
    case 'failed':
      settings.logger.error('record failed; sent back to the queue', {
        ...details,
        released: outcome.released,
        error: outcome.error instanceof Error ? outcome.error.message : String(outcome.error),
      });
      throw outcome.error instanceof Error ? outcome.error : new Error(String(outcome.error));
  }
}

/**
 * The SQS SDK, loaded the first time a record is sent back or moved: only a consumer given `queue` (and so an
 * `SQSClient` of its own) ever needs it, so the adapter loads without `@aws-sdk/client-sqs` installed.
 */
function sqsCommands() {
  return import('@aws-sdk/client-sqs');
}

/** SQS's limit on a visibility timeout: 12 hours. */
const MAX_VISIBILITY_SECONDS = 12 * 60 * 60;

/**
 * Makes a record visible again in about `afterMs` (rounded up to whole seconds) instead of after the queue's
 * visibility timeout. Returns the seconds set, or undefined when it could not (no queue access, or the call
 * failed): the record then simply returns after the visibility timeout, which is slower but just as safe.
 */
async function comeBackIn<TSummary, TEffect>(
  record: SQSRecord,
  afterMs: number,
  settings: Settings<TSummary, TEffect>,
): Promise<number | undefined> {
  const { queue } = settings;
  if (!queue) return undefined;
  const seconds = Math.min(MAX_VISIBILITY_SECONDS, Math.max(0, Math.ceil(afterMs / 1000)));
  try {
    const { ChangeMessageVisibilityCommand } = await sqsCommands();
    await queue.client.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: queue.url ?? queueUrlOf(record.eventSourceARN),
        ReceiptHandle: record.receiptHandle,
        VisibilityTimeout: seconds,
      }),
    );
    return seconds;
  } catch (error) {
    settings.logger.warn("could not shorten the record's visibility timeout; it returns after the full one", {
      messageId: record.messageId,
      error: error instanceof Error ? error.message : String(error),
    });
    return undefined;
  }
}

/** Sends a copy of the record to the dead-letter queue; true when it is there (the record is then acknowledged). */
async function moveToDeadLetters<TSummary, TEffect>(
  record: SQSRecord,
  settings: Settings<TSummary, TEffect>,
): Promise<boolean> {
  const deadLetterUrl = settings.queue?.deadLetterUrl;
  if (!settings.queue || !deadLetterUrl) return false;
  try {
    const { SendMessageCommand } = await sqsCommands();
    await settings.queue.client.send(
      new SendMessageCommand({
        QueueUrl: deadLetterUrl,
        MessageBody: record.body,
        MessageAttributes: Object.fromEntries(
          Object.entries(record.messageAttributes).flatMap(([name, value]) =>
            value.stringValue !== undefined
              ? [[name, { DataType: value.dataType, StringValue: value.stringValue }]]
              : [],
          ),
        ),
        // A FIFO dead-letter queue needs a group; keep the record's.
        ...(record.attributes.MessageGroupId
          ? {
              MessageGroupId: record.attributes.MessageGroupId,
              MessageDeduplicationId: record.messageId,
            }
          : {}),
      }),
    );
    return true;
  } catch (error) {
    settings.logger.error('could not move the record to the dead-letter queue', {
      messageId: record.messageId,
      error: error instanceof Error ? error.message : String(error),
    });
    return false;
  }
}

/** `arn:aws:sqs:eu-west-1:123456789012:orders` → `https://sqs.eu-west-1.amazonaws.com/123456789012/orders`. */
export function queueUrlOf(queueArn: string): string {
  const [, partition, , region, account, name] = queueArn.split(':');
  if (!partition || !region || !account || !name) throw new ConfigurationError(`not an SQS queue ARN: ${queueArn}`);
  const domain = partition === 'aws-cn' ? 'amazonaws.com.cn' : 'amazonaws.com';
  return `https://sqs.${region}.${domain}/${account}/${name}`;
}
