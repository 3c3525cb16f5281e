import { cleanupMiddlewares } from '@aws-lambda-powertools/commons';
import type middy from '@middy/core';
import { respondAs } from './response.js';

/**
 * Wraps a middleware's `before` that may answer the request itself (a replay, a 400, a 401).
 *
 * middy ends the chain at a `before` that returns a response: the handler and every middleware's `after` are
 * skipped. A metrics middleware that publishes in `after` then never publishes what this invocation counted (a
 * replay, a duplicate in flight): it leaks into a later invocation's flush, or is lost when the container stops; a
 * tracer's segment is never closed. Powertools' answer, which its own idempotency middleware uses: middlewares with
 * such work register a cleanup in `request.internal` (Metrics' `logMetrics`, Tracer's `captureLambdaHandler`,
 * Logger's `injectLambdaContext`), and a middleware that answers early runs them first (`cleanupMiddlewares`).
 *
 * The answer leaves in the format of the front door the request came through (`respondAs`): a middleware may build
 * it as a REST API's proxy result (`problemResponse` does) and an ALB or an HTTP API still gets its own.
 */
export function answersEarly<TRequest extends middy.Request>(
  before: (request: TRequest) => Promise<unknown>,
): (request: TRequest) => Promise<unknown> {
  const answering = async (request: TRequest): Promise<unknown> => {
    const response = await before(request);
    if (response === undefined) return undefined;
    await cleanupMiddlewares(request);
    return respondAs(request.event, response);
  };
  // middy names middlewares by their functions (timing plugins, logs): keep the wrapped one's name.
  return Object.defineProperty(answering, 'name', { value: before.name });
}
