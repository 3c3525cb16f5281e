/**
 * The HTTP adapter: middy middlewares for HTTP handlers behind any front door (API Gateway REST and HTTP APIs, function
 * URLs, ALB targets), and RFC 9457 problem responses: the adapter's own problem types (`ProblemType`), under a base
 * URI the service may set (`problemErrorHandler({ problemTypeBase })`).
 */

/** The handle a handler sees is the engine's, the same for every adapter. */
export type { IdempotencyHandle } from '../engine/operation.js';
export { type Authorizer, accountIdOf, authorizerOf, requireAccountId } from './account.js';
export { answersEarly } from './early-response.js';
export { type ProblemErrorHandlerOptions, problemErrorHandler } from './error-handler.js';
export { HttpProblem } from './errors.js';
export {
  type FrontDoor,
  frontDoorOf,
  type HttpEvent,
  type HttpResult,
  requestCookies,
  requestHeader,
  requestMethod,
  requestOperation,
} from './front-door.js';
export { header, rawBody } from './headers.js';
export {
  defaultIsStorable,
  type HttpIdempotencyOptions,
  httpIdempotency,
  REPLAYED_HEADER,
  type WithIdempotency,
} from './idempotency.js';
export { type LambdaHandler, lambdaHandler } from './lambda-handler.js';
export { IdempotencyMetric, type IdempotencyMetricName } from './metrics.js';
export {
  adapterProblemOf,
  type BodyError,
  DEFAULT_PROBLEM_TYPE_BASE,
  type GatewayProblem,
  type InvalidBodyProblem,
  isProblemOf,
  type ProblemDetails,
  type ProblemSlug,
  ProblemType,
  problemResponse,
  problemType,
  problemTypeBaseOf,
} from './problem.js';
export { type HeaderField, type HttpResponse, readResponse, respondAs, writeResponse } from './response.js';
export { type BodySchema, validateJsonBody, type WithBody } from './validate-body.js';
