import { basename, dirname, extname, join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Context } from 'aws-lambda';
import { lambdaServiceVariables } from './bundled-function';
import { type InvocationContext, type LambdaErrorReport, LambdaRuntimeError } from './execution-environment';
import type { LambdaHandler } from './lambda-invoke';
import { consoleLog, type LocalLog } from './log';

/** The worker script: Lambda's Node.js runtime for TypeScript sources (see it for the protocol). */
const RUNTIME_SCRIPT = join(__dirname, 'source-runtime.mjs');

/**
 * Environments started per function at most; further invocations wait for one to be free. Fewer than the bundles'
 * 10: a source environment's cold start compiles and loads the function's whole import graph, measured at about
 * 1.2 s of CPU (and 50-70 MB) each on this project's machine, against about 50 ms for a bundle's process.
 */
export const DEFAULT_SOURCE_ENVIRONMENTS = 4;

/**
 * How long after an invocation's deadline its environment is ended. The caller's own timer (invokeLambda) has the
 * same deadline and reports the timeout; ending it a moment later keeps that report a timeout, not a failure.
 */
const END_AFTER_DEADLINE_MS = 50;

/** The Lambda runtime the stack deploys the functions on (lib/infra/service-function.ts: `LAMBDA_RUNTIME`). */
const LAMBDA_RUNTIME = 'nodejs22.x';

/** One function run from its source: the name it is invoked by, and its entry file, which exports `handler`. */
export interface SourceFunction {
  readonly name: string;
  /** An absolute path to a `.ts` (or `.js`) file. */
  readonly entry: string;
  /** Its name in Lambda's variables (`AWS_LAMBDA_FUNCTION_NAME`) and log group. Default: `name`. */
  readonly functionName?: string;
  /** `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`. Default 128, Lambda's smallest. */
  readonly memoryMb?: number;
  /** Environments loaded at start, so that many concurrent invocations pay no cold start. Default 1. */
  readonly warmEnvironments?: number;
}

export interface SourceFunctionsOptions {
  readonly functions: readonly SourceFunction[];
  /**
   * The functions' own variables: with those the Lambda service sets (bundled-function.ts, `lambdaServiceVariables`)
   * over them, the whole `process.env` they read their configuration from at import. Nothing of this process's
   * environment reaches them but what is in here, and nothing in here reaches this process's.
   */
  readonly environment: Readonly<Record<string, string | undefined>>;
  /** The tsconfig.json that compiles the entries (its `paths` resolve their imports). Default: tsx's own lookup. */
  readonly tsconfig?: string;
  /** Execution environments per function at most. Default: DEFAULT_SOURCE_ENVIRONMENTS. */
  readonly maxEnvironments?: number;
  /** Where a crash of a runtime is reported (the invocation it ends fails too). Default: the console. */
  readonly log?: LocalLog;
}

/** Functions running from their sources, each in execution environments of its own. */
export interface SourceFunctions {
  /** By function name: invokes it in a free environment, or a new one (a cold start), as Lambda calls the handler. */
  // biome-ignore lint/suspicious/noExplicitAny: the event and result are whatever its trigger sends and takes
  readonly handlers: ReadonlyMap<string, LambdaHandler<any, any>>;
  /** How long the first environment of every function took to load (their inits, run side by side). */
  readonly initMs: number;
  /** How many environments each function has alive now, by name. */
  environmentCounts(): ReadonlyMap<string, number>;
  /** Ends every environment. Invocations still running are failed. */
  stop(): Promise<void>;
}

/** An init that failed: which function, and what Lambda would report. */
export class SourceInitError extends Error {
  constructor(readonly failures: readonly { readonly name: string; readonly error: LambdaErrorReport }[]) {
    super(
      `The functions failed to initialise:\n${failures
        .map(({ name, error }) => `  - ${name}: ${error.errorType}: ${error.errorMessage}`)
        .join('\n')}`,
    );
    this.name = 'SourceInitError';
  }
}

type FromRuntime =
  | { type: 'ready'; initMs: number }
  | { type: 'init-error'; failures: { name: string; error: LambdaErrorReport }[] }
  | { type: 'result'; id: number; json?: string }
  | { type: 'error'; id: number; error: LambdaErrorReport };

/**
 * Starts functions from their TypeScript sources, the way Lambda runs them: each function in execution
 * environments of its own (a worker thread each, with the function's own `process.env`), one invocation per
 * environment at a time, at most `maxEnvironments` per function, reused while idle. Resolves once one environment
 * of every function has loaded (rejects with a `SourceInitError` naming each that failed, as a bundle that can't
 * load stops a bundled run).
 *
 * An environment holds its function's modules, clients and connection pool, so an invocation that stalls (on a
 * row lock, a silent connection, a busy loop) holds only its own: another invocation, of that function or another
 * (the authorizer), runs in another environment. At its deadline the environment is ended, as Lambda ends one
 * whose invocation timed out (`Sandbox.Timedout`): nothing the handler does after its timeout reaches the outside
 * world, and its connections close. An environment that crashes (an uncaught error) fails only its invocation.
 * An ended environment is replaced in the background. Each call has its own environments, so two stacks in one
 * process never see each other's settings.
 *
 * @example
 * const fns = await startSourceFunctions({
 *   functions: [{ name: 'payments-get', entry: '/repo/functions/payments-get.ts' }],
 *   environment: { PAYMENTS_TABLE: 'local-payments', DYNAMODB_ENDPOINT: db },
 * });
 * const invocation = invokeLambda(fns.handlers.get('payments-get')!, event, { functionName: 'payments-get' });
 */
export async function startSourceFunctions(options: SourceFunctionsOptions): Promise<SourceFunctions> {
  const startedAt = performance.now();
  const pools = options.functions.map((fn) => new EnvironmentPool(fn, options));
  const warmed = await Promise.all(
    pools.map(async (pool) => {
      const count = Math.min(pool.warmCount, options.maxEnvironments ?? DEFAULT_SOURCE_ENVIRONMENTS);
      const results = await Promise.allSettled(Array.from({ length: Math.max(1, count) }, () => pool.warm()));
      return results.find((result) => result.status === 'rejected');
    }),
  );
  const failures = warmed.flatMap((result, i) =>
    result ? [{ name: pools[i]!.name, error: reportOf(result.reason) }] : [],
  );
  if (failures.length > 0) {
    await Promise.all(pools.map((pool) => pool.stop()));
    throw new SourceInitError(failures);
  }
  return {
    handlers: new Map(
      pools.map((pool) => [pool.name, (event: unknown, context: Context) => pool.invoke(event, context)]),
    ),
    initMs: Math.round(performance.now() - startedAt),
    environmentCounts: () => new Map(pools.map((pool) => [pool.name, pool.aliveCount])),
    async stop() {
      await Promise.all(pools.map((pool) => pool.stop()));
    },
  };
}

/** An invocation waiting for an environment of its function. */
interface Waiter {
  resolve(environment: SourceEnvironment): void;
  reject(error: Error): void;
}

/**
 * One function's environments: at most `maxEnvironments`, the idle ones reused. An invocation that finds none idle
 * has a new one started for it, and takes whichever comes first, that one or one freed by another invocation: a
 * source environment's cold start costs over a second of CPU, so a burst of short invocations is served by the warm
 * ones while the new ones load, and a stalled invocation can't keep the next one waiting longer than a cold start.
 */
class EnvironmentPool {
  readonly name: string;
  private readonly maxEnvironments: number;
  private readonly idle: SourceEnvironment[] = [];
  private readonly alive = new Set<SourceEnvironment>();
  private readonly waiting: Waiter[] = [];
  private readonly starting = new Set<Promise<void>>();
  private readonly variables: Record<string, string>;
  private stopped = false;

  constructor(
    private readonly fn: SourceFunction,
    private readonly options: SourceFunctionsOptions,
  ) {
    this.name = fn.name;
    this.maxEnvironments = options.maxEnvironments ?? DEFAULT_SOURCE_ENVIRONMENTS;
    if (!Number.isInteger(this.maxEnvironments) || this.maxEnvironments < 1) {
      throw new Error(`maxEnvironments must be a positive integer, got ${this.maxEnvironments}`);
    }
    const functionName = fn.functionName ?? fn.name;
    this.variables = {
      ...definedOnly(options.environment),
      ...lambdaServiceVariables({
        functionName,
        handler: `${basename(fn.entry, extname(fn.entry))}.handler`,
        runtime: LAMBDA_RUNTIME,
        memoryMb: fn.memoryMb ?? 128,
        taskRoot: dirname(fn.entry),
      }),
    };
  }

  get warmCount(): number {
    return this.fn.warmEnvironments ?? 1;
  }

  get aliveCount(): number {
    return [...this.alive].filter((environment) => environment.alive).length;
  }

  /** Starts an environment now and keeps it idle; rejects with its init's error. */
  async warm(): Promise<void> {
    this.release(await this.startEnvironment());
  }

  async invoke(event: unknown, context: Context): Promise<unknown> {
    // The deadline is the invocation's, fixed by the caller when it invoked; waiting and a cold start count against it.
    const timeoutMs = context.getRemainingTimeInMillis();
    const deadlineMs = Date.now() + timeoutMs;
    const environment = await this.acquire(deadlineMs, timeoutMs);
    try {
      return await environment.invoke(this.name, event, invocationContext(context, deadlineMs), timeoutMs);
    } finally {
      this.release(environment);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const waiter of this.waiting.splice(0)) waiter.reject(new Error(`${this.name} is stopped`));
    await Promise.allSettled([...this.starting]);
    await Promise.all([...this.alive].map((environment) => environment.stop()));
    this.alive.clear();
    this.idle.length = 0;
  }

  /** An idle environment, or the first one free or started; at the deadline, Lambda's timeout instead. */
  private acquire(deadlineMs: number, timeoutMs: number): Promise<SourceEnvironment> {
    if (this.stopped) return Promise.reject(new Error(`${this.name} is stopped`));
    const idle = this.takeIdle();
    if (idle) return Promise.resolve(idle);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        resolve(environment) {
          clearTimeout(timer);
          resolve(environment);
        },
        reject(error) {
          clearTimeout(timer);
          reject(error);
        },
      };
      // Its caller reports it timed out at the deadline: it must not run late.
      const timer = setTimeout(
        () => {
          this.waiting.splice(this.waiting.indexOf(waiter), 1);
          reject(timedOut(timeoutMs));
        },
        Math.max(0, deadlineMs - Date.now()),
      );
      this.waiting.push(waiter);
      this.grow();
    });
  }

  /** Starts one more environment in the background, if the function may have one more. */
  private grow(): void {
    if (this.stopped || this.alive.size + this.starting.size >= this.maxEnvironments) return;
    const started: Promise<void> = this.startEnvironment().then(
      (environment) => {
        this.starting.delete(started);
        this.release(environment);
      },
      (error: unknown) => {
        this.starting.delete(started);
        if (this.stopped) return;
        (this.options.log ?? consoleLog).error(`${this.name}: an environment failed to start`, { error });
        // Nothing else will serve them: fail the waiting invocations with the init's error, as Lambda would.
        if (this.alive.size + this.starting.size === 0) {
          const failure = error instanceof Error ? error : new Error(String(error));
          for (const waiter of this.waiting.splice(0)) waiter.reject(failure);
        }
      },
    );
    this.starting.add(started);
  }

  private async startEnvironment(): Promise<SourceEnvironment> {
    const environment = await SourceEnvironment.start(this.fn, this.variables, this.options);
    if (this.stopped) {
      // Started while the function was being stopped: it must not outlive it.
      await environment.stop();
      throw new Error(`${this.name} is stopped`);
    }
    this.alive.add(environment);
    return environment;
  }

  private takeIdle(): SourceEnvironment | undefined {
    for (let environment = this.idle.pop(); environment; environment = this.idle.pop()) {
      if (environment.alive) return environment;
      this.alive.delete(environment);
    }
    return undefined;
  }

  /**
   * A free environment goes to the first invocation waiting, or waits idle. One that was ended (a timeout, a crash)
   * is replaced, so the next invocation finds one warm.
   */
  private release(environment: SourceEnvironment): void {
    if (!environment.alive || this.stopped) {
      this.alive.delete(environment);
      if (this.idle.length === 0 || this.waiting.length > 0) this.grow();
      return;
    }
    const waiter = this.waiting.shift();
    if (waiter) waiter.resolve(environment);
    else this.idle.push(environment);
  }
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: Error): void;
}

/** One execution environment of a function run from source: a worker thread, running one invocation at a time. */
class SourceEnvironment {
  private pending: (Pending & { readonly id: number }) | undefined;
  private nextId = 1;
  private exited = false;

  private constructor(
    private readonly worker: Worker,
    private readonly exit: Promise<void>,
  ) {
    worker.on('message', (message: FromRuntime) => this.settle(message));
    void exit.then(() => {
      this.exited = true;
      this.pending?.reject(
        new LambdaRuntimeError({
          errorType: 'Runtime.ExitError',
          errorMessage: 'The runtime of the functions run from source exited',
        }),
      );
    });
  }

  static start(
    fn: SourceFunction,
    variables: Record<string, string>,
    options: SourceFunctionsOptions,
  ): Promise<SourceEnvironment> {
    const worker = new Worker(RUNTIME_SCRIPT, {
      workerData: { functions: [{ name: fn.name, entry: fn.entry }], tsconfig: options.tsconfig },
      env: { ...variables },
      // Not the parent's flags (tsx's own loader among them, under `tsx`): the runtime registers what it needs.
      execArgv: [],
    });
    let crash: Error | undefined;
    worker.on('error', (error) => {
      // An uncaught error in a handler ends the worker, as it would end a Lambda execution environment.
      crash = error;
      (options.log ?? consoleLog).error('the runtime of the functions run from source crashed', { error });
    });
    const exit = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    return new Promise((resolve, reject) => {
      const onMessage = (message: FromRuntime) => {
        if (message.type === 'ready') {
          worker.off('message', onMessage);
          resolve(new SourceEnvironment(worker, exit));
        } else if (message.type === 'init-error') {
          worker.off('message', onMessage);
          reject(
            new LambdaRuntimeError(message.failures[0]?.error ?? { errorType: 'Runtime.Unknown', errorMessage: '' }),
          );
          void worker.terminate();
        }
      };
      worker.on('message', onMessage);
      void exit.then(() =>
        reject(crash ?? new Error('the runtime of the functions run from source exited while loading them')),
      );
    });
  }

  get alive(): boolean {
    return !this.exited;
  }

  /**
   * Runs one invocation; at its deadline the worker is terminated and the invocation reported timed out after
   * `timeoutMs`, its whole budget.
   */
  invoke(name: string, event: unknown, context: InvocationContext, timeoutMs: number): Promise<unknown> {
    if (this.exited) return Promise.reject(new Error('the runtime of the functions run from source has exited'));
    if (this.pending) return Promise.reject(new Error('an execution environment runs one invocation at a time'));
    const id = this.nextId++;
    const remainingMs = Math.max(0, context.deadlineMs - Date.now());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending = undefined;
        // Not a clean stop: whatever the handler holds (a transaction, a timer that would write later) ends with it.
        this.exited = true;
        void this.worker.terminate();
        reject(timedOut(timeoutMs));
      }, remainingMs + END_AFTER_DEADLINE_MS);
      this.pending = {
        id,
        resolve: (value) => {
          clearTimeout(timer);
          this.pending = undefined;
          resolve(value);
        },
        reject: (error) => {
          clearTimeout(timer);
          this.pending = undefined;
          reject(error);
        },
      };
      this.worker.postMessage({ type: 'invoke', id, name, event, context });
    });
  }

  async stop(): Promise<void> {
    await this.worker.terminate();
    await this.exit;
  }

  private settle(message: FromRuntime): void {
    if (message.type !== 'result' && message.type !== 'error') return;
    const pending = this.pending;
    if (!pending || message.id !== pending.id) return;
    if (message.type === 'result') pending.resolve(message.json === undefined ? undefined : JSON.parse(message.json));
    else pending.reject(new LambdaRuntimeError(message.error));
  }
}

/** What Lambda reports for an invocation it ended at its timeout. */
function timedOut(timeoutMs: number): LambdaRuntimeError {
  return new LambdaRuntimeError({
    errorType: 'Sandbox.Timedout',
    errorMessage: `Task timed out after ${(timeoutMs / 1000).toFixed(2)} seconds`,
  });
}

function reportOf(error: unknown): LambdaErrorReport {
  if (error instanceof LambdaRuntimeError) return { errorType: error.errorType, errorMessage: error.message };
  if (error instanceof Error) return { errorType: error.name, errorMessage: error.message };
  return { errorType: typeof error, errorMessage: String(error) };
}

function invocationContext(context: Context, deadlineMs: number): InvocationContext {
  return {
    awsRequestId: context.awsRequestId,
    functionName: context.functionName,
    functionVersion: context.functionVersion,
    invokedFunctionArn: context.invokedFunctionArn,
    memoryLimitInMB: context.memoryLimitInMB,
    logGroupName: context.logGroupName,
    logStreamName: context.logStreamName,
    deadlineMs,
  };
}

/** `process.env` holds strings only: an unset variable is left out, not passed as "undefined". */
function definedOnly(environment: Readonly<Record<string, string | undefined>>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(environment).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
}
