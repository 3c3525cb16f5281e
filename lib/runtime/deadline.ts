import { AsyncLocalStorage } from 'node:async_hooks';
import type { Context } from 'aws-lambda';

/**
 * The running invocation's end, for whatever must not wait past it (the PostgreSQL store's queries). A module of its
 * own, free of any database client, so that every function can be wrapped without carrying pg into a DynamoDB bundle.
 */

/**
 * How long before the invocation's end the function stops waiting on PostgreSQL: the time it needs to give a key
 * back and answer (a 409, a 503 with Retry-After) instead of being cut off by its own timeout. At most 500 ms, and a
 * tenth of the invocation's time, so that a short function (the tests' 900 ms) still has most of it for its work.
 */
export const ANSWER_MARGIN_MS = 500;
const ANSWER_MARGIN_SHARE = 0.1;

/** The invocation's deadline for PostgreSQL: its end, less its answer margin. */
const invocationEnd = new AsyncLocalStorage<number>();

/**
 * The deadline the PostgreSQL store gives every query of the running invocation (its `deadline` option): the
 * invocation's end, less its answer margin ({@link ANSWER_MARGIN_MS} at most). Undefined outside a handler wrapped by
 * {@link withInvocationDeadline} (a script, a test): the database's own timeouts bound those.
 */
export function invocationDeadline(): number | undefined {
  return invocationEnd.getStore();
}

/**
 * Runs a Lambda handler with its invocation's end known to {@link invocationDeadline}: a commit whose connection
 * went silent then costs its own request's remaining time, and the function still answers. Per invocation (an
 * `AsyncLocalStorage`), so invocations sharing a process (the local stack's worker) each keep their own.
 */
export function withInvocationDeadline<TEvent, TContext extends Context, TResult>(
  handler: (event: TEvent, context: TContext) => Promise<TResult>,
): (event: TEvent, context: TContext) => Promise<TResult> {
  return (event, context) => {
    const remaining = context?.getRemainingTimeInMillis?.();
    if (remaining === undefined) return handler(event, context);
    const margin = Math.min(ANSWER_MARGIN_MS, remaining * ANSWER_MARGIN_SHARE);
    return invocationEnd.run(Date.now() + remaining - margin, () => handler(event, context));
  };
}
