import type middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { HttpProblem } from './errors.js';
import { header } from './headers.js';
import { ProblemType, problemResponse } from './problem.js';

export interface ProblemErrorHandlerOptions {
  /** Where unexpected errors are reported. Never the response: a 5xx body carries no internals. */
  readonly logger?: { error(message: string, ...rest: unknown[]): void };
}

/**
 * Turns any error into an RFC 9457 response: an {@link HttpProblem} below 500 as itself, everything else as a
 * generic 500 whose body says nothing about the cause (no stack, no SDK message). Register it FIRST so its
 * `onError` runs last, after inner middlewares (such as the idempotency release) have had their say.
 */
export function problemErrorHandler(
  options: ProblemErrorHandlerOptions = {},
): middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult> {
  const logger = options.logger ?? console;
  return {
    onError: async function problemErrorHandlerOnError(request) {
      if (request.response !== undefined) return; // an inner middleware already answered
      const error = request.error;
      if (error instanceof HttpProblem && error.expose) {
        request.response = problemResponse(error.toProblem(), error.headers);
        return;
      }
      logger.error('unhandled error', { error: describe(error), requestId: request.context?.awsRequestId });
      request.response = problemResponse({
        type: ProblemType.internal,
        title: 'Internal Server Error',
        status: error instanceof HttpProblem ? error.status : 500,
        detail: `The request could not be completed. ${retryAdvice(request.event)}`,
      });
      if (error instanceof HttpProblem) Object.assign(request.response.headers ?? {}, error.headers);
    },
  };
}

/** The advice fits the request: only one that carried an Idempotency-Key is told to reuse it. */
function retryAdvice(event: APIGatewayProxyEvent | undefined): string {
  return header(event?.headers, 'Idempotency-Key') !== undefined
    ? 'It is safe to retry with the same Idempotency-Key.'
    : 'It is safe to retry.';
}

function describe(error: unknown): Record<string, unknown> {
  if (error instanceof Error) return { name: error.name, message: error.message, stack: error.stack };
  return { value: String(error) };
}
