import { randomUUID } from 'node:crypto';
import type { ScheduledEvent } from 'aws-lambda';
import { LOCAL_ACCOUNT_ID, LOCAL_REGION } from './lambda-context';
import { invokeLambda, type LambdaHandler } from './lambda-invoke';
import { consoleLog, type LocalLog } from './log';

/** The first wait before a throttled scheduled event is sent again (Lambda's, for an asynchronous event). */
const THROTTLE_RETRY_FIRST_MS = 1_000;

export interface ScheduleOptions {
  // biome-ignore lint/suspicious/noExplicitAny: a scheduled function's result is not used
  readonly handler: LambdaHandler<ScheduledEvent, any>;
  readonly functionName: string;
  /** Time between runs (EventBridge's `rate(...)`). */
  readonly periodMs: number;
  readonly timeoutMs: number;
  readonly log?: LocalLog;
}

/** A running schedule. */
export interface Schedule {
  /** Runs the function now (waiting for a run already under way first), and resolves when it has finished. */
  runNow(): Promise<void>;
  /** Stops the timer, then waits for a run under way, at most until its timeout. */
  stop(): Promise<void>;
}

/**
 * A stand-in for an EventBridge schedule rule targeting a Lambda function: invokes the handler every `periodMs`
 * with a `Scheduled Event`, in a fresh Lambda context with its timeout. A run still going when the next is due is
 * not overlapped (the deployed function may overlap itself; the local one needn't).
 */
export function startSchedule(options: ScheduleOptions): Schedule {
  const log = options.log ?? consoleLog;
  let running: Promise<void> | undefined;
  let stopped = false;
  const wakers = new Set<() => void>();
  /** Sleeps, but wakes at once when the schedule stops. */
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wakers.delete(done);
        resolve();
      }
      wakers.add(done);
    });

  /**
   * One scheduled event, invoked as EventBridge invokes a function (asynchronously): a throttled invocation is sent
   * again, backing off from a second, as Lambda retries a throttled asynchronous event, until the schedule stops or
   * the next period is due (whose event stands in for it).
   */
  async function run(): Promise<void> {
    const event = scheduledEvent(options.functionName);
    const giveUpAt = Date.now() + options.periodMs;
    for (let delayMs = THROTTLE_RETRY_FIRST_MS; ; delayMs *= 2) {
      const invocation = invokeLambda(options.handler, event, {
        functionName: options.functionName,
        timeoutMs: options.timeoutMs,
      });
      const outcome = await invocation.outcome;
      if (outcome.kind === 'threw') log.error(`${options.functionName} failed`, { error: outcome.error });
      if (outcome.kind === 'timed-out') log.error(`${options.functionName} timed out after ${outcome.timeoutMs} ms`);
      if (outcome.kind !== 'throttled') return;
      log.error(`${options.functionName} throttled: ${outcome.error.message}`);
      if (stopped || Date.now() + delayMs >= giveUpAt) return;
      await pause(delayMs);
    }
  }

  function runOnce(): Promise<void> {
    running ??= run().finally(() => {
      running = undefined;
    });
    return running;
  }

  const timer = setInterval(() => {
    if (!stopped && running === undefined) void runOnce();
  }, options.periodMs);
  timer.unref();

  return {
    async runNow() {
      await running;
      await runOnce();
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      for (const wake of wakers) wake();
      await running;
    },
  };
}

function scheduledEvent(functionName: string): ScheduledEvent {
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account: LOCAL_ACCOUNT_ID,
    time: new Date().toISOString(),
    region: LOCAL_REGION,
    resources: [`arn:aws:events:${LOCAL_REGION}:${LOCAL_ACCOUNT_ID}:rule/${functionName}-schedule`],
    detail: {},
  };
}
