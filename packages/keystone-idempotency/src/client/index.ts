/**
 * The retry-safe client, for any endpoint that takes an `Idempotency-Key`, in browsers and Node >= 20. It imports no
 * Node built-in and nothing from the server side but the HTTP adapter's list of problem types (plain data): a test
 * bundles it for the browser and checks what it pulls in.
 */
export type { Fetch } from './attempt-log.js';
export { type OperationRequest, RetrySafeClient, type RetrySafeClientOptions } from './client.js';
export { checkIdempotencyKey, newIdempotencyKey } from './key.js';
export type { IdempotentMethod, Operation, SendOptions } from './operation.js';
export { IdempotencyProblemType, idempotencyProblemOf } from './problem-types.js';
export { type Attempt, AttemptError, InvalidResponse, type OperationResult, type Problem } from './result.js';
export { DEFAULT_RETRY_POLICY, RETRY_STATUSES, type RetryPolicy } from './retry-policy.js';
