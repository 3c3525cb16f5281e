import type { DurableLambdaHandler } from '@aws/durable-execution-sdk-js';
import { type DurableOperation, LocalDurableTestRunner, type TestResult } from '@aws/durable-execution-sdk-js-testing';
import { ExecutionNameTakenError } from '../../src/durable/errors';
import type { DurableExecutions, ExecutionState } from '../../src/durable/executions';

export interface LocalExecution {
  readonly arn: string;
  readonly name: string;
  readonly payload: string;
  readonly runner: LocalDurableTestRunner;
  /** The operations named in `watch`, taken before the run began: a handle taken later never sees earlier data. */
  readonly operations: ReadonlyMap<string, DurableOperation>;
  readonly done: Promise<TestResult>;
  started: boolean;
  result?: TestResult;
}

/** The one lane every local execution runs on, in the order they were started. */
let lane: Promise<unknown> = Promise.resolve();
const everyExecution: LocalExecution[] = [];

/**
 * {@link DurableExecutions} on AWS's local runner: each started execution runs the handler in-process with
 * `LocalDurableTestRunner` (its checkpoints, replays, waits and step retries are the SDK's own). What is simulated
 * here is Lambda's start by name, as its documentation states it: a name that exists with the same payload answers
 * that execution, with another payload `DurableExecutionAlreadyStartedException` (here `ExecutionNameTakenError`).
 * The runner itself has no execution names.
 *
 * The local runner runs one execution at a time (measured: of two runs started together, one never progressed), so
 * executions here queue behind each other on one lane shared by every instance, as a busy Lambda could delay them: a
 * queued execution is RUNNING to `describe`, as a started one that has not finished is.
 */
export class LocalDurableExecutions implements DurableExecutions {
  private readonly byName = new Map<string, LocalExecution>();
  private readonly byArn = new Map<string, LocalExecution>();
  /** Every start request, and how many created an execution: the witness for "one execution per key". */
  readonly startRequests: string[] = [];

  constructor(
    private readonly handler: DurableLambdaHandler,
    /** Operations (callbacks) a test will want to answer: their handles are taken before each run starts. */
    private readonly watch: readonly string[] = [],
  ) {}

  get executionsStarted(): number {
    return this.byName.size;
  }

  async start({ name, payload }: { name: string; payload: string }) {
    this.startRequests.push(name);
    const existing = this.byName.get(name);
    if (existing) {
      if (existing.payload !== payload) throw new ExecutionNameTakenError(name);
      return { executionArn: existing.arn };
    }
    const runner = new LocalDurableTestRunner({ handlerFunction: this.handler });
    const arn = `arn:local:durable-execution/${name}/${this.byName.size + 1}`;
    // Measured: a handle taken after its operation's data arrived waits forever in waitForData.
    const operations = new Map(this.watch.map((operation) => [operation, runner.getOperation(operation)]));
    const execution: LocalExecution = {
      arn,
      name,
      payload,
      runner,
      operations,
      started: false,
      done: lane.then(() => {
        execution.started = true;
        return runner.run({ payload: JSON.parse(payload) });
      }),
    };
    lane = execution.done.then(
      (result) => {
        execution.result = result;
      },
      () => {},
    );
    everyExecution.push(execution);
    this.byName.set(name, execution);
    this.byArn.set(arn, execution);
    return { executionArn: arn };
  }

  async describe(executionArn: string): Promise<ExecutionState> {
    const execution = this.byArn.get(executionArn);
    if (!execution) throw Object.assign(new Error('no such execution'), { name: 'ResourceNotFoundException' });
    const input = execution.payload;
    const result = execution.result;
    if (!result) return { status: 'RUNNING', input };
    const status = result.getStatus();
    if (status === 'SUCCEEDED') return { status, input, result: result.getResult() ?? null };
    if (status === 'FAILED' || status === 'TIMED_OUT' || status === 'STOPPED') {
      const errorType = result.getError().errorType;
      return { status, input, ...(errorType ? { errorType } : {}) };
    }
    return { status: 'RUNNING', input };
  }

  /** The execution's runner (to answer its callbacks) and its end. */
  execution(name: string): LocalExecution {
    const execution = this.byName.get(name);
    if (!execution) throw new Error(`no execution named ${name}`);
    return execution;
  }

  /**
   * Ends every execution still running, in every instance, one at a time in lane order: `release` is given each one's
   * runner once it runs (to fail its pending callback, say). For a test file's `afterAll`, so that nothing runs on
   * when the runner's environment is torn down.
   */
  static async drain(release: (execution: LocalExecution) => Promise<void>): Promise<void> {
    for (const execution of everyExecution) {
      if (execution.result) continue;
      await waitUntil(() => execution.started);
      await Promise.race([execution.done, release(execution)]);
      const ended = await Promise.race([execution.done.then(() => true), delay(3000).then(() => false)]);
      if (!ended) throw new Error(`local execution ${execution.name} did not end within 3 s of its release`);
    }
  }

  /** Waits for every execution started so far to end. */
  async settled(): Promise<void> {
    await Promise.all([...this.byName.values()].map((execution) => execution.done));
  }
}

async function waitUntil(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
