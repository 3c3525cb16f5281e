import type { APIGatewayProxyResult } from 'aws-lambda';
import * as z from 'zod/mini';
import { problemType } from './problem-types.js';

export { PROBLEM_TYPE_BASE, type ProblemSlug, ProblemType, problemType } from './problem-types.js';

/**
 * RFC 9457 problem details. `type` is a stable identifier clients can switch on (documented in the README and the
 * OpenAPI document); it names the problem, it is not a page to fetch. Extension members are allowed, as the RFC
 * allows them; the OpenAPI document is generated from this schema and its extensions below.
 */
export const ProblemDetails = z.looseObject({
  type: z.string().check(z.minLength(1)),
  title: z.string(),
  status: z.number().check(z.int(), z.minimum(400), z.maximum(599)),
  detail: z.optional(z.string()),
});
export type ProblemDetails = z.infer<typeof ProblemDetails>;

/** One problem with a request body: where (a dotted path, empty for the whole body) and what. */
export const BodyError = z.strictObject({ path: z.string(), message: z.string() });
export type BodyError = z.infer<typeof BodyError>;

/** The `invalid-body` problem: every problem with the body at once, so a client can fix them in one go. */
export const InvalidBodyProblem = z.extend(ProblemDetails, { errors: z.array(BodyError).check(z.minLength(1)) });
export type InvalidBodyProblem = z.infer<typeof InvalidBodyProblem>;

/**
 * What API Gateway answers itself (401 from the authorizer, 413, 429, a 502 or 504 from the integration) once the
 * stack's gateway responses shape it (lib/infra/api.ts), and what the local gateway answers in their place: a
 * problem of type `about:blank` whose title is API Gateway's message (null for some of its errors).
 */
export const GatewayProblem = z.strictObject({
  type: z.literal('about:blank'),
  title: z.nullable(z.string()),
  requestId: z.string().check(z.minLength(1)),
});
export type GatewayProblem = z.infer<typeof GatewayProblem>;

/** An API Gateway proxy result carrying a problem+json body. `type` may be a {@link ProblemType} slug or a URI. */
export function problemResponse(problem: ProblemDetails, headers: Record<string, string> = {}): APIGatewayProxyResult {
  const type = problem.type.includes(':') ? problem.type : problemType(problem.type);
  return {
    statusCode: problem.status,
    headers: { 'Content-Type': 'application/problem+json', ...headers },
    body: JSON.stringify({ ...problem, type }),
  };
}
