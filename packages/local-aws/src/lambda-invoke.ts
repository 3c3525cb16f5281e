import type { Context } from 'aws-lambda';
import { createLambdaContext, DEFAULT_FUNCTION_TIMEOUT_MS, type LambdaFunctionOptions } from './lambda-context';

/**
 * A handler as Lambda calls it: `(event, context)`, returning a promise.
 *
 * Declared through a method signature so TypeScript checks its parameters bivariantly: a middy handler declares a
 * context its middlewares extend (`Context & WithIdempotency`), which they add at run time, so it has to be accepted
 * where the emulator passes a plain `Context`, exactly as the Lambda runtime does.
 */
export type LambdaHandler<TEvent, TResult> = {
  invoke(event: TEvent, context: Context): Promise<TResult>;
}['invoke'];

/** What an invocation that first has to find an execution environment is given (see {@link EnvironmentHandler}). */
export interface PendingInvocation {
  /** Its ids and names; its deadline is fixed when an environment starts running it. */
  readonly context: Context;
  readonly timeoutMs: number;
  /** Called when an environment starts running the invocation: its timeout runs from then. */
  readonly started: () => void;
}

/**
 * A handler that runs each invocation in an execution environment it first finds or starts (bundled-function.ts).
 * Lambda counts an invocation's timeout from when its environment starts running it, never the wait for one, and
 * refuses an invocation past the function's concurrency limit (`TooManyRequestsException`): `invokeLambda` calls
 * `inEnvironment`, and starts the timeout when it reports the start.
 */
export type EnvironmentHandler<TEvent, TResult> = LambdaHandler<TEvent, TResult> & {
  readonly inEnvironment: (event: TEvent, invocation: PendingInvocation) => Promise<TResult>;
};

/**
 * Lambda's answer to an invocation past the function's concurrency limit (its reserved concurrency, or what the
 * account has left), a 429 to a direct caller: the function never ran. `reason` is Lambda's.
 */
export class TooManyRequestsException extends Error {
  readonly reason: 'ReservedFunctionConcurrentInvocationLimitExceeded' | 'ConcurrentInvocationLimitExceeded';

  constructor(functionName: string, reason: TooManyRequestsException['reason'], detail: string) {
    super(`Rate Exceeded. ${functionName}: ${detail}`);
    this.name = 'TooManyRequestsException';
    this.reason = reason;
  }
}

/** How one invocation ended, as the caller of Lambda sees it. */
export type InvocationOutcome<TResult> =
  | { readonly kind: 'returned'; readonly value: TResult }
  | { readonly kind: 'threw'; readonly error: unknown }
  | { readonly kind: 'timed-out'; readonly timeoutMs: number }
  /** Lambda refused it (the function at its concurrency limit): it never ran, and may be sent again. */
  | { readonly kind: 'throttled'; readonly error: TooManyRequestsException };

/** A started invocation: its outcome, and when the emulator may forget it. */
export interface Invocation<TResult> {
  readonly context: Context;
  /** Settles when the handler settles or its timeout passes, whichever is first. Never rejects. */
  readonly outcome: Promise<InvocationOutcome<TResult>>;
  /**
   * Settles when the handler settles, or at its timeout at the latest. Lambda would freeze the sandbox at the
   * timeout; in one Node process we can't stop a promise, so a shutdown waits for this and no longer.
   */
  readonly finished: Promise<void>;
}

/**
 * Invokes a handler the way the Lambda runtime does: with a fresh `Context`, and a timeout after which the
 * invocation counts as failed even though (locally) the handler's code may still be running. The timeout runs from
 * when the invocation starts: at once for a handler in this process, when an environment starts running it for an
 * {@link EnvironmentHandler}.
 *
 * A synchronous throw and a rejected promise are the same failure to Lambda, so the call is wrapped in a promise.
 */
export function invokeLambda<TEvent, TResult>(
  handler: LambdaHandler<TEvent, TResult>,
  event: TEvent,
  fn: LambdaFunctionOptions,
): Invocation<TResult> {
  const timeoutMs = fn.timeoutMs ?? DEFAULT_FUNCTION_TIMEOUT_MS;
  const context = createLambdaContext({ ...fn, timeoutMs });
  let started!: () => void;
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  const run = (): Promise<TResult> => {
    if (isEnvironmentHandler(handler)) return handler.inEnvironment(event, { context, timeoutMs, started });
    started();
    return handler(event, context);
  };
  const settled: Promise<InvocationOutcome<TResult>> = Promise.resolve()
    .then(run)
    .then(
      (value) => ({ kind: 'returned', value }),
      (error: unknown) =>
        error instanceof TooManyRequestsException ? { kind: 'throttled', error } : { kind: 'threw', error },
    );
  let timer: NodeJS.Timeout | undefined;
  const timedOut = running.then(
    () =>
      new Promise<InvocationOutcome<TResult>>((resolve) => {
        timer = setTimeout(() => resolve({ kind: 'timed-out', timeoutMs }), timeoutMs);
      }),
  );
  const outcome = Promise.race([settled, timedOut]).finally(() => clearTimeout(timer));
  return { context, outcome, finished: outcome.then(() => undefined) };
}

function isEnvironmentHandler<TEvent, TResult>(
  handler: LambdaHandler<TEvent, TResult>,
): handler is EnvironmentHandler<TEvent, TResult> {
  return typeof (handler as Partial<EnvironmentHandler<TEvent, TResult>>).inEnvironment === 'function';
}
