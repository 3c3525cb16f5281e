import type { APIGatewayProxyEvent } from 'aws-lambda';
import { HttpProblem } from './errors.js';
import { ProblemType } from './problem-types.js';

/**
 * The caller's account (tenant), as the authorizer put it in the request context: `accountId` in a REST API's
 * Lambda authorizer context, or in an HTTP API's `lambda` context. The one place it is read: the idempotency
 * middleware scopes keys with it, and handlers act for it. Never taken from the request itself.
 */
export function accountIdOf(event: Pick<APIGatewayProxyEvent, 'requestContext'>): string | undefined {
  const authorizer = event.requestContext?.authorizer as
    | { accountId?: unknown; lambda?: { accountId?: unknown } }
    | null
    | undefined;
  const value = authorizer?.accountId ?? authorizer?.lambda?.accountId;
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

/**
 * {@link accountIdOf} for a handler that cannot act without one: a 401 problem when the request carries no
 * authenticated account (a route deployed without its authorizer).
 */
export function requireAccountId(event: Pick<APIGatewayProxyEvent, 'requestContext'>): string {
  const accountId = accountIdOf(event);
  if (accountId === undefined) {
    throw new HttpProblem(401, ProblemType.unauthenticated, 'Unauthenticated', {
      detail: 'The request carries no authenticated account.',
    });
  }
  return accountId;
}
