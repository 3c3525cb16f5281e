/** The HTTP adapter: middy middlewares for API Gateway handlers, and RFC 9457 problem responses. */

/** The handle a handler sees is the engine's, the same for every adapter. */
export type { IdempotencyHandle } from '../engine/operation.js';
export { problemErrorHandler } from './error-handler.js';
export { HttpProblem } from './errors.js';
export { header, rawBody } from './headers.js';
export {
  defaultIsStorable,
  type HttpIdempotencyOptions,
  httpIdempotency,
  IdempotencyMetric,
  REPLAYED_HEADER,
  type WithIdempotency,
} from './idempotency.js';
export { PROBLEM_TYPE_BASE, type ProblemDetails, ProblemType, problemResponse, problemType } from './problem.js';
export { validateJsonBody, type WithBody } from './validate-body.js';
