import type { APIGatewayProxyResult } from 'aws-lambda';

/**
 * RFC 9457 problem details. `type` is a stable identifier clients can switch on (documented in the README); it
 * names the problem, it is not a page to fetch.
 */
export interface ProblemDetails {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail?: string;
  readonly [extension: string]: unknown;
}

export const PROBLEM_TYPE_BASE = 'https://keystone-idempotency.dev/problems/';

/** The problem types this library produces, by slug. */
export const ProblemType = {
  badRequest: 'bad-request',
  invalidBody: 'invalid-body',
  idempotencyKeyMissing: 'idempotency-key-missing',
  idempotencyKeyInvalid: 'idempotency-key-invalid',
  requestInFlight: 'request-in-flight',
  idempotencyKeyReused: 'idempotency-key-reused',
  unauthenticated: 'unauthenticated',
  notFound: 'not-found',
  internal: 'internal-error',
} as const;

export function problemType(slug: string): string {
  return `${PROBLEM_TYPE_BASE}${slug}`;
}

/** An API Gateway proxy result carrying a problem+json body. `type` may be a {@link ProblemType} slug or a URI. */
export function problemResponse(problem: ProblemDetails, headers: Record<string, string> = {}): APIGatewayProxyResult {
  const type = problem.type.includes(':') ? problem.type : problemType(problem.type);
  return {
    statusCode: problem.status,
    headers: { 'Content-Type': 'application/problem+json', ...headers },
    body: JSON.stringify({ ...problem, type }),
  };
}
