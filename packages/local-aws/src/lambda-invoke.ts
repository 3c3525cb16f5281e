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

/** How one invocation ended, as the caller of Lambda sees it. */
export type InvocationOutcome<TResult> =
  | { readonly kind: 'returned'; readonly value: TResult }
  | { readonly kind: 'threw'; readonly error: unknown }
  | { readonly kind: 'timed-out'; readonly timeoutMs: number };

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
 * invocation counts as failed even though (locally) the handler's code may still be running.
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
  const settled: Promise<InvocationOutcome<TResult>> = Promise.resolve()
    .then(() => handler(event, context))
    .then(
      (value) => ({ kind: 'returned', value }),
      (error: unknown) => ({ kind: 'threw', error }),
    );
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<InvocationOutcome<TResult>>((resolve) => {
    timer = setTimeout(() => resolve({ kind: 'timed-out', timeoutMs }), timeoutMs);
  });
  const outcome = Promise.race([settled, timedOut]).finally(() => clearTimeout(timer));
  return { context, outcome, finished: outcome.then(() => undefined) };
}
