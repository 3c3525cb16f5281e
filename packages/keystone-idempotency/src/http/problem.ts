import type { APIGatewayProxyResult } from 'aws-lambda';
import { ConfigurationError } from '../engine/errors.js';
import { DEFAULT_PROBLEM_TYPE_BASE, problemType } from './problem-types.js';

export {
  adapterProblemOf,
  DEFAULT_PROBLEM_TYPE_BASE,
  isProblemOf,
  type ProblemSlug,
  ProblemType,
  problemType,
} from './problem-types.js';

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

/**
 * An API Gateway proxy result carrying a problem+json body. `type` may be a URI, or a slug (a {@link ProblemType}
 * or a service's own), which is written under `base`.
 */
export function problemResponse(
  problem: ProblemDetails,
  headers: Record<string, string> = {},
  base: string = DEFAULT_PROBLEM_TYPE_BASE,
): APIGatewayProxyResult {
  const type = problem.type.includes(':') ? problem.type : problemType(problem.type, base);
  return {
    statusCode: problem.status,
    headers: { 'Content-Type': 'application/problem+json', ...headers },
    body: JSON.stringify({ ...problem, type }),
  };
}

/** Where `problemErrorHandler` leaves the service's base for the adapter's other middlewares. */
const BASE_KEY = 'keystone-idempotency:problemTypeBase';

/**
 * Checks a base URI a service sets: absolute (a scheme, as RFC 9457 recommends, so that a slug and a `type` are never
 * confused), and ending where a slug can follow (`/`, `:` or `#`).
 */
export function checkedProblemTypeBase(base: string): string {
  if (!/^[a-z][a-z0-9+.-]*:/i.test(base) || !'/:#'.includes(base.charAt(base.length - 1))) {
    throw new ConfigurationError(
      `problemTypeBase must be an absolute URI ending in "/", ":" or "#" (for example "https://api.example.com/problems/"), got ${JSON.stringify(base)}`,
    );
  }
  return base;
}

/** Records the service's base in a request for the middlewares after the problem handler. @internal */
export function setProblemTypeBase(request: { internal: unknown }, base: string): void {
  (request.internal as Record<string, unknown>)[BASE_KEY] = base;
}

/**
 * The base this request's problems are answered under: the one `problemErrorHandler({ problemTypeBase })` set, or
 * {@link DEFAULT_PROBLEM_TYPE_BASE}. Every middleware of the adapter that answers a problem itself asks this.
 */
export function problemTypeBaseOf(request: { internal?: unknown }): string {
  const base = (request.internal as Record<string, unknown> | undefined)?.[BASE_KEY];
  return typeof base === 'string' ? base : DEFAULT_PROBLEM_TYPE_BASE;
}

/** {@link problemResponse} under the base of `request` ({@link problemTypeBaseOf}). @internal */
export function requestProblem(
  request: { internal?: unknown },
  problem: ProblemDetails,
  headers: Record<string, string> = {},
): APIGatewayProxyResult {
  return problemResponse(problem, headers, problemTypeBaseOf(request));
}
