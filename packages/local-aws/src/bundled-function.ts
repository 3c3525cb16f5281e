import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Context } from 'aws-lambda';
import { ExecutionEnvironment, type InvocationContext } from './execution-environment';
import { LOCAL_REGION } from './lambda-context';
import type { LambdaHandler } from './lambda-invoke';

/**
 * Variables the Lambda service sets in every execution environment and refuses in a function's configuration (a
 * deployment that sets one fails): a template that sets one is refused here too.
 */
export const RESERVED_VARIABLES: ReadonlySet<string> = new Set([
  '_HANDLER',
  '_X_AMZN_TRACE_ID',
  'AWS_DEFAULT_REGION',
  'AWS_REGION',
  'AWS_EXECUTION_ENV',
  'AWS_LAMBDA_FUNCTION_NAME',
  'AWS_LAMBDA_FUNCTION_MEMORY_SIZE',
  'AWS_LAMBDA_FUNCTION_VERSION',
  'AWS_LAMBDA_INITIALIZATION_TYPE',
  'AWS_LAMBDA_LOG_GROUP_NAME',
  'AWS_LAMBDA_LOG_STREAM_NAME',
  'AWS_ACCESS_KEY',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AWS_LAMBDA_RUNTIME_API',
  'LAMBDA_TASK_ROOT',
  'LAMBDA_RUNTIME_DIR',
]);

/**
 * Added to every local environment, and nowhere in Lambda:
 * - `AWS_SAM_LOCAL`: the switch local emulators set; Powertools Tracer reads it and stays off. A bundle built with
 *   tracing compiled in (staging, prod) then sends no segments towards an X-Ray daemon that isn't there (UDP to
 *   127.0.0.1:2000); it would still answer without it (tried with a prod synth), tracing into nowhere;
 * - the AWS SDK's notice about Node 20 describes this machine, not the function (Lambda runs it on nodejs22.x).
 */
const LOCAL_ONLY_VARIABLES = {
  AWS_SAM_LOCAL: 'true',
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
} as const;

/** Environments started per function at most; further invocations wait for one to be free. */
const DEFAULT_MAX_ENVIRONMENTS = 10;

export interface BundledFunctionOptions {
  /** The function's name in its context, its environment and its log lines. */
  readonly functionName: string;
  /** The directory CDK zips and uploads as the function's code (`<cdk.out>/asset.<hash>`). */
  readonly codeDirectory: string;
  /**
   * Run from `codeDirectory` itself instead of a copy, and leave it there when stopped: for a bundle this run built
   * in a directory of its own (source-functions.ts), away from any node_modules already. Default: a copy.
   */
  readonly runInPlace?: boolean;
  /** The template's `Handler`: `index.handler`. */
  readonly handler: string;
  /** The template's `Runtime`: `nodejs22.x`. */
  readonly runtime: string;
  readonly memoryMb: number;
  /** The function's own environment, exactly as configured (see bundled-environment.ts); nothing else is inherited. */
  readonly environment: Readonly<Record<string, string>>;
  /** Default 10. */
  readonly maxEnvironments?: number;
  /** Where the function's stdout and stderr lines go (CloudWatch's part). Default: this process's, prefixed. */
  readonly output?: (line: string, stream: 'stdout' | 'stderr') => void;
}

/** A function running from its bundle, in execution environments of its own. */
export interface BundledFunction {
  readonly functionName: string;
  /** Invokes the function in a free environment, or a new one (a cold start), as Lambda does. */
  // biome-ignore lint/suspicious/noExplicitAny: the event and result are whatever its trigger sends and takes
  readonly handler: LambdaHandler<any, any>;
  /** Starts an environment now and keeps it warm; rejects with the init's error, as Lambda would report it. */
  warm(): Promise<void>;
  /** The process ids of the environments alive now. */
  environmentPids(): number[];
  /** Kills every environment and removes the unpacked code. */
  stop(): Promise<void>;
}

/**
 * Runs a function from the bundle `cdk synth` wrote, the way Lambda runs it: the asset copied into a task root of
 * its own (as Lambda unzips it into /var/task, away from this repository's node_modules, so an import the bundle
 * does not carry fails here as it would there), one process per execution environment with exactly the function's
 * environment plus what the Lambda service adds, one invocation per environment at a time, and a new environment
 * for an invocation that finds none free.
 *
 * @example
 * const fn = await startBundledFunction({ functionName: 'payments-get', codeDirectory, handler: 'index.handler',
 *   runtime: 'nodejs22.x', memoryMb: 256, environment: { PAYMENTS_TABLE: 'payments' } });
 * await fn.warm(); // fails here, with Lambda's error, if the bundle can't be imported
 * const invocation = invokeLambda(fn.handler, event, { functionName: 'payments-get', timeoutMs: 12_000 });
 */
export function startBundledFunction(options: BundledFunctionOptions): BundledFunction {
  const reserved = Object.keys(options.environment).filter((name) => RESERVED_VARIABLES.has(name));
  if (reserved.length > 0) {
    throw new Error(`${options.functionName} sets ${reserved.join(', ')}, which Lambda reserves for itself`);
  }
  const taskRoot = options.runInPlace
    ? options.codeDirectory
    : mkdtempSync(join(tmpdir(), `keystone-lambda-${options.functionName}-`));
  const removeTaskRoot = () => rmSync(taskRoot, { recursive: true, force: true });
  if (!options.runInPlace) {
    // Also when this process exits without stopping the function (a second Ctrl-C exits at once).
    process.once('exit', removeTaskRoot);
    cpSync(options.codeDirectory, taskRoot, { recursive: true });
  }
  const output = options.output ?? prefixedOutput(options.functionName);
  const slots = new Slots(options.maxEnvironments ?? DEFAULT_MAX_ENVIRONMENTS);
  const idle: ExecutionEnvironment[] = [];
  const alive = new Set<ExecutionEnvironment>();
  let stopped = false;

  async function startEnvironment(): Promise<ExecutionEnvironment> {
    const environment = await ExecutionEnvironment.start({
      taskRoot,
      environment: lambdaEnvironment(options, taskRoot),
      output,
    });
    if (stopped) {
      // Started while the function was being stopped: it must not outlive it.
      await environment.stop();
      throw new Error(`${options.functionName} is stopped`);
    }
    alive.add(environment);
    return environment;
  }

  function takeIdle(): ExecutionEnvironment | undefined {
    for (let environment = idle.pop(); environment; environment = idle.pop()) {
      if (environment.alive) return environment;
      alive.delete(environment);
    }
    return undefined;
  }

  /** An environment whose invocation ran past its deadline is ended, as Lambda ends it, even if it just answered. */
  async function putBack(environment: ExecutionEnvironment, deadlineMs = Number.POSITIVE_INFINITY): Promise<void> {
    if (environment.alive && !stopped && Date.now() < deadlineMs) {
      idle.push(environment);
      return;
    }
    alive.delete(environment);
    await environment.stop();
  }

  async function handler(event: unknown, context: Context): Promise<unknown> {
    // The deadline is the invocation's, fixed by the caller when it invoked; a cold start counts against it.
    const deadlineMs = Date.now() + context.getRemainingTimeInMillis();
    await slots.take();
    let environment: ExecutionEnvironment | undefined;
    try {
      if (stopped) throw new Error(`${options.functionName} is stopped`);
      environment = takeIdle() ?? (await startEnvironment());
      return await environment.invoke(event, invocationContext(context, options, deadlineMs));
    } finally {
      if (environment) await putBack(environment, deadlineMs);
      slots.give();
    }
  }

  return {
    functionName: options.functionName,
    handler,
    async warm() {
      await slots.take();
      try {
        await putBack(await startEnvironment());
      } finally {
        slots.give();
      }
    },
    environmentPids: () => [...alive].filter((e) => e.alive).flatMap((e) => (e.pid === undefined ? [] : [e.pid])),
    async stop() {
      stopped = true;
      await Promise.all([...alive].map((environment) => environment.stop()));
      alive.clear();
      idle.length = 0;
      if (!options.runInPlace) {
        process.off('exit', removeTaskRoot);
        removeTaskRoot();
      }
    },
  };
}

/** What the Lambda service puts in every environment, around the function's own variables. */
function lambdaEnvironment(options: BundledFunctionOptions, taskRoot: string): Record<string, string> {
  return {
    // Lambda's defaults that a function's configuration may change.
    PATH: '/usr/local/bin:/usr/bin:/bin',
    LANG: 'en_US.UTF-8',
    TZ: ':UTC',
    ...options.environment,
    ...lambdaServiceVariables({ ...options, taskRoot }),
  };
}

/** What identifies the function to the variables Lambda sets in each of its environments. */
export interface LambdaServiceIdentity {
  readonly functionName: string;
  /** `_HANDLER`: `index.handler`. */
  readonly handler: string;
  /** `nodejs22.x`. */
  readonly runtime: string;
  readonly memoryMb: number;
  /** `LAMBDA_TASK_ROOT`: where the function's code is. */
  readonly taskRoot: string;
}

/**
 * The variables the Lambda service sets in every execution environment (RESERVED_VARIABLES, those that exist
 * outside a traced invocation), and the local-only ones. Set last, over the function's own: the engine's refusal of
 * the off switch (`AWS_LAMBDA_FUNCTION_NAME`) and every library that asks "am I in Lambda?" see what they see
 * deployed, whatever the caller's environment holds.
 */
export function lambdaServiceVariables(fn: LambdaServiceIdentity): Record<string, string> {
  return {
    _HANDLER: fn.handler,
    AWS_REGION: LOCAL_REGION,
    AWS_DEFAULT_REGION: LOCAL_REGION,
    AWS_EXECUTION_ENV: `AWS_Lambda_${fn.runtime}`,
    AWS_LAMBDA_FUNCTION_NAME: fn.functionName,
    AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(fn.memoryMb),
    AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand',
    AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/${fn.functionName}`,
    // The role's session credentials in Lambda; harmless local ones here, never the caller's own.
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: 'local',
    LAMBDA_TASK_ROOT: fn.taskRoot,
    ...LOCAL_ONLY_VARIABLES,
  };
}

function invocationContext(context: Context, options: BundledFunctionOptions, deadlineMs: number): InvocationContext {
  return {
    awsRequestId: context.awsRequestId,
    functionName: options.functionName,
    functionVersion: context.functionVersion,
    invokedFunctionArn: context.invokedFunctionArn,
    memoryLimitInMB: String(options.memoryMb),
    logGroupName: context.logGroupName,
    logStreamName: context.logStreamName,
    deadlineMs,
  };
}

function prefixedOutput(functionName: string): BundledFunctionOptions['output'] & {} {
  return (line, stream) => (stream === 'stderr' ? process.stderr : process.stdout).write(`[${functionName}] ${line}\n`);
}

/** A counting semaphore: at most `size` environments, each running one invocation. */
class Slots {
  private free: number;
  private readonly waiting: (() => void)[] = [];

  constructor(size: number) {
    if (!Number.isInteger(size) || size < 1) throw new Error(`maxEnvironments must be a positive integer, got ${size}`);
    this.free = size;
  }

  async take(): Promise<void> {
    if (this.free > 0) {
      this.free -= 1;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free += 1;
  }
}
