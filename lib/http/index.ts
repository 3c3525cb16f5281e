/** The HTTP adapter: middy middlewares for API Gateway handlers, and RFC 9457 problem responses. */
export { problemErrorHandler } from './error-handler';
export { HttpProblem } from './errors';
export { header, rawBody } from './headers';
export {
  defaultIsStorable,
  type HttpIdempotencyOptions,
  httpIdempotency,
  type IdempotencyHandle,
  IdempotencyMetric,
  REPLAYED_HEADER,
  type WithIdempotency,
} from './idempotency';
export { PROBLEM_TYPE_BASE, type ProblemDetails, ProblemType, problemResponse, problemType } from './problem';
export { validateJsonBody, type WithBody } from './validate-body';
