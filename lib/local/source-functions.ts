import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Context } from 'aws-lambda';
import { type InvocationContext, type LambdaErrorReport, LambdaRuntimeError } from './execution-environment';
import type { LambdaHandler } from './lambda-invoke';
import { consoleLog, type LocalLog } from './log';

/** The worker script: Lambda's Node.js runtime for TypeScript sources (see it for the protocol). */
const RUNTIME_SCRIPT = join(__dirname, 'source-runtime.mjs');

/** One function run from its source: the name it is invoked by, and its entry file, which exports `handler`. */
export interface SourceFunction {
  readonly name: string;
  /** An absolute path to a `.ts` (or `.js`) file. */
  readonly entry: string;
}

export interface SourceFunctionsOptions {
  readonly functions: readonly SourceFunction[];
  /**
   * The functions' whole `process.env`: what they read their configuration from at import. Nothing of this
   * process's environment reaches them but what is in here, and nothing in here reaches this process's.
   */
  readonly environment: Readonly<Record<string, string | undefined>>;
  /** The tsconfig.json that compiles the entries (its `paths` resolve their imports). Default: tsx's own lookup. */
  readonly tsconfig?: string;
  /** Where a crash of the runtime is reported (the invocations it ends fail too). Default: the console. */
  readonly log?: LocalLog;
}

/** Functions running from their sources, in a runtime of their own. */
export interface SourceFunctions {
  /** By function name: invokes it in the runtime, as Lambda calls the handler. */
  // biome-ignore lint/suspicious/noExplicitAny: the event and result are whatever its trigger sends and takes
  readonly handlers: ReadonlyMap<string, LambdaHandler<any, any>>;
  /** How long loading every function took (the init, cold starts included). */
  readonly initMs: number;
  /** Ends the runtime. Invocations still running are failed. */
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
 * Starts functions from their TypeScript sources in a worker thread with `environment` as its `process.env`, and
 * resolves once every one of them has loaded (rejects with a `SourceInitError` naming each that failed, as a bundle
 * that can't load stops a bundled run).
 *
 * The functions of one call share the worker, as they shared the stack's process before: their modules, clients
 * and connection pools. Each call has its own worker, so two stacks in one process never see each other's settings.
 * A worker that dies (an uncaught error in a handler) fails the invocations it was running; the next invocation
 * starts a new one, as Lambda starts a new execution environment after a crash.
 *
 * @example
 * const fns = await startSourceFunctions({
 *   functions: [{ name: 'payments-get', entry: '/repo/functions/payments-get.ts' }],
 *   environment: { PAYMENTS_TABLE: 'local-payments', DYNAMODB_ENDPOINT: db },
 * });
 * const invocation = invokeLambda(fns.handlers.get('payments-get')!, event, { functionName: 'payments-get' });
 */
export async function startSourceFunctions(options: SourceFunctionsOptions): Promise<SourceFunctions> {
  let runtime = await SourceRuntime.start(options);
  const { initMs } = runtime;
  let restarting: Promise<SourceRuntime> | undefined;
  let stopped = false;

  const current = async (): Promise<SourceRuntime> => {
    if (stopped) throw new Error('the source functions are stopped');
    if (runtime.alive) return runtime;
    restarting ??= SourceRuntime.start(options).finally(() => {
      restarting = undefined;
    });
    runtime = await restarting;
    return runtime;
  };

  const handlers = new Map(
    options.functions.map(({ name }) => {
      const handler = async (event: unknown, context: Context): Promise<unknown> => {
        // The deadline is the invocation's, fixed by the caller when it invoked.
        const deadlineMs = Date.now() + context.getRemainingTimeInMillis();
        return (await current()).invoke(name, event, invocationContext(context, deadlineMs));
      };
      return [name, handler];
    }),
  );
  return {
    handlers,
    initMs,
    async stop() {
      stopped = true;
      await (await restarting?.catch(() => undefined))?.stop();
      await runtime.stop();
    },
  };
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: Error): void;
}

/** One worker, and the invocations it is running. */
class SourceRuntime {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private exited = false;

  private constructor(
    private readonly worker: Worker,
    private readonly exit: Promise<void>,
    readonly initMs: number,
  ) {
    worker.on('message', (message: FromRuntime) => this.settle(message));
    void exit.then(() => {
      this.exited = true;
      const error = new LambdaRuntimeError({
        errorType: 'Runtime.ExitError',
        errorMessage: 'The runtime of the functions run from source exited',
      });
      for (const pending of this.pending.values()) pending.reject(error);
      this.pending.clear();
    });
  }

  static start(options: SourceFunctionsOptions): Promise<SourceRuntime> {
    const worker = new Worker(RUNTIME_SCRIPT, {
      workerData: { functions: options.functions, tsconfig: options.tsconfig },
      env: definedOnly(options.environment),
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
          resolve(new SourceRuntime(worker, exit, message.initMs));
        } else if (message.type === 'init-error') {
          worker.off('message', onMessage);
          reject(new SourceInitError(message.failures));
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

  invoke(name: string, event: unknown, context: InvocationContext): Promise<unknown> {
    if (this.exited) return Promise.reject(new Error('the runtime of the functions run from source has exited'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ type: 'invoke', id, name, event, context });
    });
  }

  async stop(): Promise<void> {
    await this.worker.terminate();
    await this.exit;
  }

  private settle(message: FromRuntime): void {
    if (message.type !== 'result' && message.type !== 'error') return;
    const pending = this.pending.get(message.id);
    if (!pending) return;
    this.pending.delete(message.id);
    if (message.type === 'result') pending.resolve(message.json === undefined ? undefined : JSON.parse(message.json));
    else pending.reject(new LambdaRuntimeError(message.error));
  }
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
