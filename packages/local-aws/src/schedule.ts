import { randomUUID } from 'node:crypto';
import type { ScheduledEvent } from 'aws-lambda';
import { LOCAL_ACCOUNT_ID, LOCAL_REGION } from './lambda-context';
import { invokeLambda, type LambdaHandler } from './lambda-invoke';
import { consoleLog, type LocalLog } from './log';

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

  async function run(): Promise<void> {
    const invocation = invokeLambda(options.handler, scheduledEvent(options.functionName), {
      functionName: options.functionName,
      timeoutMs: options.timeoutMs,
    });
    const outcome = await invocation.outcome;
    if (outcome.kind === 'threw') log.error(`${options.functionName} failed`, { error: outcome.error });
    if (outcome.kind === 'timed-out') log.error(`${options.functionName} timed out after ${outcome.timeoutMs} ms`);
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
