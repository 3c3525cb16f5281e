import {
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { DEFAULT_FUNCTION_TIMEOUT_MS } from './lambda-context';
import { type InvocationOutcome, invokeLambda, type LambdaHandler } from './lambda-invoke';
import { consoleLog, type LocalLog } from './log';
import { type BatchVerdict, judgeBatch, recordsToDelete } from './sqs-batch-outcome';
import { toSqsRecord } from './sqs-event';

/** An SQS consumer handler: the same function the deployed stack subscribes to the queue. */
// biome-ignore lint/suspicious/noConfusingVoidType: an async handler that returns nothing is a Promise<void>
export type SqsHandler = LambdaHandler<SQSEvent, SQSBatchResponse | void>;

export interface SqsPollerOptions {
  client: SQSClient;
  queueUrl: string;
  queueArn: string;
  handler: SqsHandler;
  /** Messages per invocation, 1 to 10 (one ReceiveMessage). Default 10, Lambda's default for SQS. */
  batchSize?: number;
  /** Long-poll duration, 0 to 20. Default 1, which also bounds how long `stop()` waits for an idle poll. */
  waitTimeSeconds?: number;
  /** Name in the context and in logs. Default `sqs-consumer`. */
  functionName?: string;
  /** The consumer function's timeout; must not exceed the queue's visibility timeout. Default 3000. */
  functionTimeoutMs?: number;
  /** The event source mapping's `ReportBatchItemFailures`. Default true. */
  reportBatchItemFailures?: boolean;
  /**
   * Batches in flight at once, like the mapping's concurrent pollers (and its `maximumConcurrency`): each poll loop
   * receives a batch, invokes the handler and deletes the successes, independently of the others. Default 1.
   */
  concurrency?: number;
  /** Where failures and timeouts are reported. Default: the console. */
  log?: LocalLog;
}

/** A running poller, standing in for one Lambda SQS event source mapping. */
export interface SqsPoller {
  /** Stops polling, then waits for the batch in flight (the handler and its deletes) to finish. */
  stop(): Promise<void>;
  /**
   * Resolves after a ReceiveMessage that started after this call came back empty with no batch in flight: every
   * message that was visible has been handled. Messages waiting out a visibility timeout are not visible, so a
   * retry still to come does not count.
   */
  drained(): Promise<void>;
}

/**
 * Polls a queue and invokes a handler the way Lambda's SQS event source mapping does: one long-poll receive per
 * batch with all system and message attributes, records in Lambda's shape, then a delete of exactly the messages
 * that succeeded (see `judgeBatch`). Failed messages are not touched: they reappear after the visibility timeout,
 * and SQS itself moves them to the DLQ after `maxReceiveCount` receives.
 *
 * Like `CreateEventSourceMapping`, it refuses a function timeout longer than the queue's visibility timeout, which
 * would let a message be delivered twice while its first invocation is still running.
 *
 * With `concurrency` 1 it processes one batch at a time, in order; more runs that many batches at once, as the
 * deployed mapping does.
 *
 * @example
 * const poller = await startSqsPoller({ client, queueUrl, queueArn, handler: consumer, functionTimeoutMs: 10_000 });
 * await poller.drained();
 * await poller.stop();
 */
export async function startSqsPoller(options: SqsPollerOptions): Promise<SqsPoller> {
  const settings = validated(options);
  const visibilityMs = await visibilityCoveringTimeout(options.client, options.queueUrl, settings.functionTimeoutMs);
  const region = await options.client.config.region();
  const poller = new LocalSqsPoller(options, { ...settings, visibilityMs }, region);
  poller.start();
  return { stop: () => poller.stop(), drained: () => poller.drained() };
}

interface PollerSettings {
  /** The queue's visibility timeout: how long a received batch is this poller's to retry when throttled. */
  readonly visibilityMs: number;
  readonly batchSize: number;
  readonly waitTimeSeconds: number;
  readonly functionName: string;
  readonly functionTimeoutMs: number;
  readonly reportBatchItemFailures: boolean;
  readonly concurrency: number;
  readonly log: LocalLog;
}

function validated(options: SqsPollerOptions): Omit<PollerSettings, 'visibilityMs'> {
  const batchSize = options.batchSize ?? 10;
  const waitTimeSeconds = options.waitTimeSeconds ?? 1;
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 10) {
    throw new Error(`batchSize must be an integer from 1 to 10, got ${batchSize}`);
  }
  if (!Number.isInteger(waitTimeSeconds) || waitTimeSeconds < 0 || waitTimeSeconds > 20) {
    throw new Error(`waitTimeSeconds must be an integer from 0 to 20, got ${waitTimeSeconds}`);
  }
  const concurrency = options.concurrency ?? 1;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new Error(`concurrency must be a positive integer, got ${concurrency}`);
  }
  return {
    batchSize,
    waitTimeSeconds,
    functionName: options.functionName ?? 'sqs-consumer',
    functionTimeoutMs: options.functionTimeoutMs ?? DEFAULT_FUNCTION_TIMEOUT_MS,
    reportBatchItemFailures: options.reportBatchItemFailures ?? true,
    concurrency,
    log: options.log ?? consoleLog,
  };
}

/** The queue's visibility timeout, refused when it is shorter than the function's timeout. */
async function visibilityCoveringTimeout(client: SQSClient, queueUrl: string, timeoutMs: number): Promise<number> {
  const { Attributes } = await client.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['VisibilityTimeout'] }),
  );
  const visibilitySeconds = Number(Attributes?.VisibilityTimeout ?? 30);
  if (visibilitySeconds * 1000 < timeoutMs) {
    throw new Error(
      `Queue visibility timeout: ${visibilitySeconds} seconds is less than Function timeout: ${timeoutMs / 1000} seconds`,
    );
  }
  return visibilitySeconds * 1000;
}

/** Back-off after a failed ReceiveMessage (emulator restarting, queue deleted), so errors don't spin the CPU. */
const RECEIVE_RETRY_DELAY_MS = 1_000;

/** The first wait before a throttled batch is sent again, doubled each time up to the second. */
const THROTTLE_RETRY_FIRST_MS = 100;
const THROTTLE_RETRY_MAX_MS = 2_000;

class LocalSqsPoller {
  private stopping = false;
  private loops: Promise<void>[] = [];
  private receivesStarted = 0;
  /** Batches being handled right now, over all loops: "drained" means none, and an empty receive. */
  private batchesInFlight = 0;
  private readonly drainWaiters: { afterReceive: number; resolve: () => void; reject: (error: Error) => void }[] = [];
  private readonly wakers = new Set<() => void>();

  constructor(
    private readonly options: SqsPollerOptions,
    private readonly settings: PollerSettings,
    private readonly region: string,
  ) {}

  start(): void {
    this.loops = Array.from({ length: this.settings.concurrency }, () => this.run());
  }

  async stop(): Promise<void> {
    this.stopping = true;
    for (const wake of this.wakers) wake();
    await Promise.all(this.loops);
    for (const waiter of this.drainWaiters.splice(0))
      waiter.reject(new Error('the SQS poller stopped before draining'));
  }

  drained(): Promise<void> {
    if (this.stopping) return Promise.reject(new Error('the SQS poller is stopped'));
    return new Promise((resolve, reject) =>
      this.drainWaiters.push({ afterReceive: this.receivesStarted + 1, resolve, reject }),
    );
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      const receiveNumber = ++this.receivesStarted;
      const messages = await this.receive();
      if (messages === undefined) {
        await this.pause(RECEIVE_RETRY_DELAY_MS);
      } else if (messages.length === 0) {
        if (this.batchesInFlight === 0) this.notifyDrained(receiveNumber);
      } else {
        this.batchesInFlight += 1;
        await this.processBatch(messages)
          .catch((error: unknown) => {
            // A bug in the emulator, not the handler: the batch is left alone and comes back after the visibility timeout.
            this.settings.log.error('local SQS poller failed on a batch', { error });
          })
          .finally(() => {
            this.batchesInFlight -= 1;
          });
      }
    }
  }

  /** Returns the messages, or undefined when the receive failed (already logged). */
  private async receive(): Promise<Message[] | undefined> {
    try {
      const { Messages } = await this.options.client.send(
        new ReceiveMessageCommand({
          QueueUrl: this.options.queueUrl,
          MaxNumberOfMessages: this.settings.batchSize,
          WaitTimeSeconds: this.settings.waitTimeSeconds,
          MessageSystemAttributeNames: ['All'],
          MessageAttributeNames: ['All'],
        }),
      );
      return Messages ?? [];
    } catch (error) {
      if (!this.stopping) this.settings.log.error('ReceiveMessage failed', { queueUrl: this.options.queueUrl, error });
      return undefined;
    }
  }

  private async processBatch(messages: Message[]): Promise<void> {
    const receivedAt = Date.now();
    const source = { queueArn: this.options.queueArn, region: this.region };
    const records = messages.map((message) => toSqsRecord(message, source));
    const invocation = await this.invokeUntilRun(records, receivedAt);
    const outcome = await invocation.outcome;
    const verdict = judgeBatch(outcome, records, this.settings.reportBatchItemFailures);
    this.report(outcome, verdict, {
      functionName: this.settings.functionName,
      awsRequestId: invocation.context.awsRequestId,
      messageIds: records.map((record) => record.messageId),
    });
    await this.deleteMessages(recordsToDelete(verdict, records));
  }

  /**
   * Invokes the function with the batch, and again while it is throttled, backing off, as Lambda's event source
   * mapping retries a throttled batch: until a new attempt could no longer finish within the messages' visibility
   * timeout, when they are left to come back on their own.
   */
  private async invokeUntilRun(records: SQSRecord[], receivedAt: number) {
    const { functionName, functionTimeoutMs, visibilityMs, log } = this.settings;
    for (let delayMs = THROTTLE_RETRY_FIRST_MS; ; delayMs = Math.min(2 * delayMs, THROTTLE_RETRY_MAX_MS)) {
      const invocation = invokeLambda(this.options.handler, { Records: records } satisfies SQSEvent, {
        functionName,
        timeoutMs: functionTimeoutMs,
      });
      const outcome = await invocation.outcome;
      const tooLate = Date.now() + delayMs + functionTimeoutMs > receivedAt + visibilityMs;
      if (outcome.kind !== 'throttled' || tooLate || this.stopping) return invocation;
      log.info(`${functionName} throttled; the batch is sent again in ${delayMs} ms`, {
        messageIds: records.map((record) => record.messageId),
      });
      await this.pause(delayMs);
    }
  }

  /** What CloudWatch would show for the invocation: the handler's error, and what becomes of the batch. */
  private report(
    outcome: InvocationOutcome<unknown>,
    verdict: BatchVerdict,
    details: { functionName: string; awsRequestId: string; messageIds: string[] },
  ): void {
    const { log } = this.settings;
    if (outcome.kind === 'threw') log.error('handler failed', { ...details, error: outcome.error });
    if (outcome.kind === 'throttled') log.error(`throttled: ${outcome.error.message}`, details);
    if (verdict.kind === 'all-failed') {
      log.error(`batch failed (${verdict.reason}); its messages return after the visibility timeout`, details);
    } else if (verdict.kind === 'partially-failed') {
      const { failedMessageIds } = verdict;
      log.info(`${failedMessageIds.length} of ${details.messageIds.length} messages failed`, {
        ...details,
        failedMessageIds,
      });
    }
  }

  /** DeleteMessageBatch takes at most 10 entries; a batch is at most 10 messages, but chunk anyway. */
  private async deleteMessages(records: readonly SQSRecord[]): Promise<void> {
    for (let start = 0; start < records.length; start += 10) {
      const chunk = records.slice(start, start + 10);
      try {
        const { Failed } = await this.options.client.send(
          new DeleteMessageBatchCommand({
            QueueUrl: this.options.queueUrl,
            Entries: chunk.map((record, index) => ({ Id: String(index), ReceiptHandle: record.receiptHandle })),
          }),
        );
        if (Failed && Failed.length > 0)
          this.settings.log.error('DeleteMessageBatch failed for some messages', { Failed });
      } catch (error) {
        // The messages will be delivered again: the same thing AWS does when a delete is lost.
        this.settings.log.error('DeleteMessageBatch failed', { error });
      }
    }
  }

  private notifyDrained(receiveNumber: number): void {
    for (let i = this.drainWaiters.length - 1; i >= 0; i--) {
      const waiter = this.drainWaiters[i]!;
      if (receiveNumber >= waiter.afterReceive) {
        this.drainWaiters.splice(i, 1);
        waiter.resolve();
      }
    }
  }

  /** Sleeps, but wakes at once when stop() is called. */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wakers = this.wakers;
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wakers.delete(done);
        resolve();
      }
      wakers.add(done);
    });
  }
}
