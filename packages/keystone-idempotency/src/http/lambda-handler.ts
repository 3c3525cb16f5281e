import type { Context } from 'aws-lambda';

/** A handler as Lambda (and a test) calls it: the event and the plain Lambda context. */
export type LambdaHandler<TEvent, TResult> = (event: TEvent, context: Context) => Promise<TResult>;

/**
 * The composed middy handler, typed as Lambda calls it. middy types a handler with the context its middlewares
 * build (`context.body` from {@link validateJsonBody}, `context.idempotency` from {@link httpIdempotency}), so
 * calling it from a test with a Lambda `Context` would need a cast, although those fields are exactly what the
 * middlewares add on the way in. This is the same function, with the signature its callers have.
 *
 * @example
 * export const handler = lambdaHandler(
 *   middy<HttpEvent, HttpResult, Error, OrderContext>(createOrder)
 *     .use(problemErrorHandler())
 *     .use(validateJsonBody(Order))
 *     .use(httpIdempotency({ store })),
 * );
 * // in a test: await handler(event, context), with `context: Context`
 */
export function lambdaHandler<TEvent, TResult>(
  // biome-ignore lint/suspicious/noExplicitAny: any context its middlewares build; what the caller passes is Context
  handler: (event: TEvent, context: any) => Promise<TResult>,
): LambdaHandler<TEvent, TResult> {
  return handler;
}
