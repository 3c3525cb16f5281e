import type { APIGatewayProxyResult } from 'aws-lambda';
import { problemType } from './problem-types.js';

export { PROBLEM_TYPE_BASE, type ProblemSlug, ProblemType, problemType } from './problem-types.js';

/**
 * RFC 9457 problem details. `type` is a stable identifier clients can switch on (documented in the README and the
 * OpenAPI document); it names the problem, it is not a page to fetch. Extension members are allowed, as the RFC
 * allows them. Plain types: the adapter answers problems without loading a schema library (the reference service
 * keeps zod schemas of these bodies for its OpenAPI document, declared to produce exactly these types).
 */
export interface ProblemDetails {
  readonly type: string;
  readonly title: string;
  /** 400 to 599. */
  readonly status: number;
  readonly detail?: string;
  readonly [extension: string]: unknown;
}

/** One problem with a request body: where (a dotted path, empty for the whole body) and what. */
export interface BodyError {
  readonly path: string;
  readonly message: string;
}

/** The `invalid-body` problem: every problem with the body at once (at least one), so a client fixes them in one go. */
export interface InvalidBodyProblem extends ProblemDetails {
  readonly errors: readonly BodyError[];
}

/**
 * What API Gateway answers itself (401 from the authorizer, 413, 429, a 502 or 504 from the integration) once a
 * stack's gateway responses shape it, and what a local gateway answers in their place: a problem of type
 * `about:blank` whose title is API Gateway's message (null for some of its errors).
 */
export interface GatewayProblem {
  readonly type: 'about:blank';
  readonly title: string | null;
  readonly requestId: string;
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
