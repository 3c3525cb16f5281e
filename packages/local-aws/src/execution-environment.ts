import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/** The script each environment runs: Lambda's Node.js runtime, reduced to loading a module and calling its export. */
const RUNTIME_SCRIPT = join(__dirname, 'lambda-runtime.mjs');

/** Lambda's limit on the init phase (importing the module and running its top level). */
export const INIT_TIMEOUT_MS = 10_000;

/**
 * How long after an invocation's deadline its environment is killed. The caller's own timer (invokeLambda) has the
 * same deadline and reports the timeout; killing a moment later keeps that report a timeout, not a failure.
 */
const KILL_AFTER_DEADLINE_MS = 50;

/** A failure as Lambda's runtime reports it: `Runtime.ImportModuleError`, `Runtime.HandlerNotFound`, the handler's own error... */
export interface LambdaErrorReport {
  readonly errorType: string;
  readonly errorMessage: string;
  readonly stack?: string;
}

/** A failed init or invocation of a bundled function, with the name and message Lambda would report. */
export class LambdaRuntimeError extends Error {
  readonly errorType: string;

  constructor(report: LambdaErrorReport) {
    super(report.errorMessage);
    this.name = report.errorType;
    this.errorType = report.errorType;
    // The environment's own stack (source-mapped to the TypeScript sources by --enable-source-maps, where set).
    if (report.stack) this.stack = report.stack;
  }
}

/** What the handler's `context` is built from, in the environment; the deadline is fixed when the invocation starts. */
export interface InvocationContext {
  readonly awsRequestId: string;
  readonly functionName: string;
  readonly functionVersion: string;
  readonly invokedFunctionArn: string;
  readonly memoryLimitInMB: string;
  readonly logGroupName: string;
  readonly logStreamName: string;
  /** Epoch milliseconds. */
  readonly deadlineMs: number;
}

export interface ExecutionEnvironmentOptions {
  /** The unpacked code (LAMBDA_TASK_ROOT): the working directory, as /var/task is in Lambda. */
  readonly taskRoot: string;
  /** The process's whole environment: nothing of the parent's is inherited. */
  readonly environment: Readonly<Record<string, string>>;
  /** Each line the function writes, as CloudWatch would receive it. */
  readonly output: (line: string, stream: 'stdout' | 'stderr') => void;
}

type FromRuntime =
  | { type: 'ready'; initMs: number }
  | { type: 'init-error'; error: LambdaErrorReport }
  | { type: 'result'; id: number; value: unknown }
  | { type: 'error'; id: number; error: LambdaErrorReport };

interface Pending {
  readonly id: number;
  resolve(value: unknown): void;
  reject(error: LambdaRuntimeError): void;
}

/**
 * One Lambda execution environment: a Node process of its own that imports the function's bundle once and then
 * runs one invocation at a time, as Lambda does.
 *
 * A process, not a module in the caller's process or a worker thread, because that is what makes the emulation
 * honest about what a bundle needs: the process has exactly its function's environment (nothing of the stack's or
 * another function's), resolves imports from its own code directory only, applies the function's `NODE_OPTIONS`,
 * and can be killed at the timeout, after which (as in Lambda) it is gone and the next invocation starts a new one.
 */
export class ExecutionEnvironment {
  readonly initMs: number;
  private readonly child: ChildProcess;
  /** Resolves with why the process ended (`exit status 1`, `signal: SIGKILL`). */
  private readonly exit: Promise<string>;
  private pending: Pending | undefined;
  private nextId = 1;

  private constructor(child: ChildProcess, exit: Promise<string>, initMs: number) {
    this.child = child;
    this.exit = exit;
    this.initMs = initMs;
    child.on('message', (message: FromRuntime) => this.settle(message));
    void exit.then((reason) =>
      this.pending?.reject(
        new LambdaRuntimeError({
          errorType: 'Runtime.ExitError',
          errorMessage: `Runtime exited with error: ${reason}`,
        }),
      ),
    );
  }

  /**
   * Starts the process and runs the init phase. Rejects with the init's error (`Runtime.ImportModuleError`,
   * `Runtime.HandlerNotFound`, or whatever the module's top level threw), or when it takes longer than Lambda allows.
   */
  static start(options: ExecutionEnvironmentOptions): Promise<ExecutionEnvironment> {
    const child = spawn(process.execPath, [RUNTIME_SCRIPT], {
      cwd: options.taskRoot,
      env: { ...options.environment },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    forwardLines(child, options.output);
    const exit = new Promise<string>((resolve) =>
      child.once('exit', (code, signal) => resolve(signal ? `signal: ${signal}` : `exit status ${code}`)),
    );
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (report: LambdaErrorReport) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        child.kill('SIGKILL');
        void exit.then(() => reject(new LambdaRuntimeError(report)));
      };
      const timer = setTimeout(
        () => fail({ errorType: 'Runtime.InitTimeout', errorMessage: `Init timed out after ${INIT_TIMEOUT_MS} ms` }),
        INIT_TIMEOUT_MS,
      );
      child.on('error', (error) => fail({ errorType: 'Runtime.StartError', errorMessage: error.message }));
      child.once('message', (message: FromRuntime) => {
        if (message.type === 'init-error') return fail(message.error);
        if (message.type !== 'ready' || settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(new ExecutionEnvironment(child, exit, message.initMs));
      });
      void exit.then((reason) =>
        fail({ errorType: 'Runtime.ExitError', errorMessage: `Runtime exited during init with ${reason}` }),
      );
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** False once the process has exited, been killed at a timeout, or was stopped. */
  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null && !this.child.killed;
  }

  /** True while an invocation runs: an environment takes one at a time. */
  get busy(): boolean {
    return this.pending !== undefined;
  }

  /**
   * Runs one invocation. At the deadline the process is killed, as Lambda ends an environment whose invocation timed
   * out: nothing the handler does after its timeout can reach the outside world any more.
   */
  invoke(event: unknown, context: InvocationContext): Promise<unknown> {
    if (this.pending) return Promise.reject(new Error('an execution environment runs one invocation at a time'));
    if (!this.alive) return Promise.reject(new Error('the execution environment has exited'));
    const id = this.nextId++;
    const timeoutMs = Math.max(0, context.deadlineMs - Date.now());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending = undefined;
        this.child.kill('SIGKILL');
        const seconds = (timeoutMs / 1000).toFixed(2);
        reject(
          new LambdaRuntimeError({
            errorType: 'Sandbox.Timedout',
            errorMessage: `Task timed out after ${seconds} seconds`,
          }),
        );
      }, timeoutMs + KILL_AFTER_DEADLINE_MS);
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
      this.child.send({ type: 'invoke', id, event, context }, (error) => {
        if (error)
          this.pending?.reject(new LambdaRuntimeError({ errorType: 'Runtime.ExitError', errorMessage: error.message }));
      });
    });
  }

  /** Kills the process and waits for it to be gone. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    await this.exit;
  }

  private settle(message: FromRuntime): void {
    const pending = this.pending;
    if (!pending || !('id' in message) || message.id !== pending.id) return;
    if (message.type === 'result') pending.resolve(message.value);
    else pending.reject(new LambdaRuntimeError(message.error));
  }
}

function forwardLines(child: ChildProcess, output: ExecutionEnvironmentOptions['output']): void {
  for (const stream of ['stdout', 'stderr'] as const) {
    const readable = child[stream];
    if (readable) createInterface({ input: readable }).on('line', (line) => output(line, stream));
  }
}
