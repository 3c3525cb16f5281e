import { randomBytes, randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';

/** The account and region every local ARN uses: obviously fake, so a local ARN never matches a real resource. */
export const LOCAL_ACCOUNT_ID = '000000000000';
export const LOCAL_REGION = 'local';

/** Lambda's own default, and CDK's: a function without an explicit timeout gets 3 seconds. */
export const DEFAULT_FUNCTION_TIMEOUT_MS = 3_000;

/** What the emulators know about the function being invoked. */
export interface LambdaFunctionOptions {
  functionName: string;
  /** The function's configured timeout; `getRemainingTimeInMillis()` counts down from it. Default 3000. */
  timeoutMs?: number;
  /** Default 128, Lambda's smallest size and the CDK default. */
  memoryLimitInMB?: number;
  region?: string;
  accountId?: string;
  /** Injected for tests; defaults to `Date.now`. */
  now?: () => number;
}

/**
 * Builds the `Context` Lambda passes as the handler's second argument, for one invocation.
 *
 * The deadline is fixed when the context is made (Lambda starts the clock when the invocation starts), so
 * `getRemainingTimeInMillis()` falls to 0 and stays there. The deprecated `done`/`fail`/`succeed` throw: a handler
 * that still calls them would silently do nothing useful on the async Node runtimes, so fail loudly here instead.
 *
 * @example
 * const context = createLambdaContext({ functionName: 'payments-create', timeoutMs: 10_000 });
 * await handler(event, context);
 */
export function createLambdaContext(options: LambdaFunctionOptions): Context {
  const now = options.now ?? Date.now;
  const timeoutMs = options.timeoutMs ?? DEFAULT_FUNCTION_TIMEOUT_MS;
  const deadline = now() + timeoutMs;
  const region = options.region ?? LOCAL_REGION;
  const accountId = options.accountId ?? LOCAL_ACCOUNT_ID;
  const functionVersion = '$LATEST';
  return {
    awsRequestId: randomUUID(),
    functionName: options.functionName,
    functionVersion,
    invokedFunctionArn: `arn:aws:lambda:${region}:${accountId}:function:${options.functionName}`,
    memoryLimitInMB: String(options.memoryLimitInMB ?? 128),
    logGroupName: `/aws/lambda/${options.functionName}`,
    logStreamName: logStreamName(new Date(now()), functionVersion),
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, deadline - now()),
    done: deprecatedCallback('done'),
    fail: deprecatedCallback('fail'),
    succeed: deprecatedCallback('succeed'),
  };
}

/** Lambda's stream name format: `2024/05/01/[$LATEST]` followed by 32 hex characters, one per execution environment. */
function logStreamName(date: Date, version: string): string {
  const day = date.toISOString().slice(0, 10).replaceAll('-', '/');
  return `${day}/[${version}]${randomBytes(16).toString('hex')}`;
}

function deprecatedCallback(name: 'done' | 'fail' | 'succeed'): () => never {
  return () => {
    throw new Error(`context.${name}() is a deprecated Lambda callback and is not supported: return a promise instead`);
  };
}
