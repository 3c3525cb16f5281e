import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Context } from 'aws-lambda';
import { EnvironmentPool } from './environment-pool';
import { ExecutionEnvironment, type InvocationContext } from './execution-environment';
import { LOCAL_REGION } from './lambda-context';
import type { EnvironmentHandler, PendingInvocation } from './lambda-invoke';

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

/** The concurrency of a function that names none: Lambda's for a new account. */
const DEFAULT_CONCURRENCY = 10;

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
  /**
   * Invocations in flight at most (so environments at most), past which an invocation is throttled: the function's
   * reserved concurrency, or what the account allows it. Default 10.
   */
  readonly concurrency?: number;
  /** Whether `concurrency` is the function's reserved concurrency (the throttle's reason says so). */
  readonly reserved?: boolean;
  /** How long an environment with nothing to do is kept (all but the last). Default 60 s. */
  readonly idleMs?: number;
  /** Where the function's stdout and stderr lines go (CloudWatch's part). Default: this process's, prefixed. */
  readonly output?: (line: string, stream: 'stdout' | 'stderr') => void;
}

/** A function running from its bundle, in execution environments of its own. */
export interface BundledFunction {
  readonly functionName: string;
  /**
   * Invokes the function in a free environment, or a new one (a cold start), as Lambda does; its timeout runs from
   * when the environment starts it, and past the function's concurrency it is throttled.
   */
  // biome-ignore lint/suspicious/noExplicitAny: the event and result are whatever its trigger sends and takes
  readonly handler: EnvironmentHandler<any, any>;
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
 * environment plus what the Lambda service adds, one invocation per environment at a time, a new environment for
 * an invocation that finds none free, up to the function's concurrency, and past it the invocation throttled
 * (environment-pool.ts).
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
  const pool = new EnvironmentPool({
    functionName: options.functionName,
    concurrency: options.concurrency ?? DEFAULT_CONCURRENCY,
    reserved: options.reserved ?? false,
    idleMs: options.idleMs,
    start: () => ExecutionEnvironment.start({ taskRoot, environment: lambdaEnvironment(options, taskRoot), output }),
  });

  async function inEnvironment(event: unknown, invocation: PendingInvocation): Promise<unknown> {
    const environment = await pool.acquire();
    // Lambda's clock starts now: the wait for an environment, and its init, were not the invocation's time.
    invocation.started();
    const deadlineMs = Date.now() + invocation.timeoutMs;
    try {
      return await environment.invoke(event, invocationContext(invocation.context, options, deadlineMs));
    } finally {
      // One whose invocation ran past its deadline is ended, as Lambda ends it, even if it just answered.
      pool.release(environment, environment.alive && Date.now() < deadlineMs);
    }
  }

  const handler = Object.assign(
    // Called as a plain handler: its timeout is what the context has left when it is called.
    (event: unknown, context: Context) =>
      inEnvironment(event, { context, timeoutMs: context.getRemainingTimeInMillis(), started: () => undefined }),
    { inEnvironment },
  );

  return {
    functionName: options.functionName,
    handler,
    warm: () => pool.warm(),
    environmentPids: () => pool.environments().flatMap((e) => (e.pid === undefined ? [] : [e.pid])),
    async stop() {
      await pool.stop();
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
