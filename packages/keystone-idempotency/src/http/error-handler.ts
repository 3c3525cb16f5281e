import type middy from '@middy/core';
import { HttpProblem } from './errors.js';
import { type HttpEvent, type HttpResult, requestHeader } from './front-door.js';
import { checkedProblemTypeBase, ProblemType, problemResponse, setProblemTypeBase } from './problem.js';
import { DEFAULT_PROBLEM_TYPE_BASE } from './problem-types.js';
import { respondAs } from './response.js';

export interface ProblemErrorHandlerOptions {
  /** Where unexpected errors are reported. Never the response: a 5xx body carries no internals. */
  readonly logger?: { error(message: string, ...rest: unknown[]): void };
  /**
   * The absolute URI the problem `type`s are written under: the adapter's own (`request-in-flight`, ...) and any
   * slug a handler throws in an {@link HttpProblem}, so a service answers every problem in its own namespace, e.g.
   * `https://api.example.com/problems/`. It ends in `/`, `:` or `#`; the slug follows it. The adapter's other
   * middlewares (`validateJsonBody`, `httpIdempotency`) answer under it too, being registered after this one.
   * Default {@link DEFAULT_PROBLEM_TYPE_BASE} (`https://keystone-idempotency.dev/problems/`).
   */
  readonly problemTypeBase?: string;
}

/**
 * Turns any error into an RFC 9457 response: an {@link HttpProblem} below 500 as itself, everything else as a
 * generic 500 whose body says nothing about the cause (no stack, no SDK message). Register it FIRST so its
 * `onError` runs last, after inner middlewares (such as the idempotency release) have had their say.
 *
 * Being the outermost HTTP middleware, it also writes the handler's own answer in the format of the front door the
 * request came through (`respondAs`): a handler that returns a REST API's proxy result answers an HTTP API, a
 * function URL and an ALB target in theirs (an ALB's `statusDescription`, payload 2.0's `cookies`).
 */
export function problemErrorHandler(
  options: ProblemErrorHandlerOptions = {},
): middy.MiddlewareObj<HttpEvent, HttpResult> {
  const logger = options.logger ?? console;
  const base = checkedProblemTypeBase(options.problemTypeBase ?? DEFAULT_PROBLEM_TYPE_BASE);
  return {
    before: async function problemErrorHandlerBefore(request) {
      setProblemTypeBase(request, base);
    },
    after: async function problemErrorHandlerAfter(request) {
      request.response = respondAs(request.event, request.response) as HttpResult;
    },
    onError: async function problemErrorHandlerOnError(request) {
      if (request.response !== undefined) {
        // An inner middleware already answered.
        request.response = respondAs(request.event, request.response) as HttpResult;
        return;
      }
      const error = request.error;
      if (error instanceof HttpProblem && error.expose) {
        request.response = respondAs(
          request.event,
          problemResponse(error.toProblem(), error.headers, base),
        ) as HttpResult;
        return;
      }
      logger.error('unhandled error', { error: describe(error), requestId: request.context?.awsRequestId });
      const response = problemResponse(
        {
          type: ProblemType.internal,
          title: 'Internal Server Error',
          status: error instanceof HttpProblem ? error.status : 500,
          detail: `The request could not be completed. ${retryAdvice(request.event)}`,
        },
        {},
        base,
      );
      if (error instanceof HttpProblem) Object.assign(response.headers ?? {}, error.headers);
      request.response = respondAs(request.event, response) as HttpResult;
    },
  };
}

/** The advice fits the request: only one that carried an Idempotency-Key is told to reuse it. */
function retryAdvice(event: HttpEvent | undefined): string {
  return event && requestHeader(event, 'Idempotency-Key') !== undefined
    ? 'It is safe to retry with the same Idempotency-Key.'
    : 'It is safe to retry.';
}

function describe(error: unknown): Record<string, unknown> {
  if (error instanceof Error) return { name: error.name, message: error.message, stack: error.stack };
  return { value: String(error) };
}
