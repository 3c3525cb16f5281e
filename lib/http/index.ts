/** The HTTP adapter: middy middlewares for API Gateway handlers, and RFC 9457 problem responses. */
export { problemErrorHandler } from './error-handler.js';
export { HttpProblem } from './errors.js';
export { header, rawBody } from './headers.js';
export {
  defaultIsStorable,
  type HttpIdempotencyOptions,
  httpIdempotency,
  type IdempotencyHandle,
  IdempotencyMetric,
  REPLAYED_HEADER,
  type WithIdempotency,
} from './idempotency.js';
export { PROBLEM_TYPE_BASE, type ProblemDetails, ProblemType, problemResponse, problemType } from './problem.js';
export { validateJsonBody, type WithBody } from './validate-body.js';
