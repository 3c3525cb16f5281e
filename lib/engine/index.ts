/**
 * The idempotency engine: keys, fingerprints, the pure decision, the store contract every store implements, the
 * operation handle every adapter gives its work, recovery, and `makeIdempotent` for any function. Runtime code
 * only, and no database: the stores live beside it (keystone-idempotency/dynamodb, keystone-idempotency/postgres),
 * as do the HTTP and SQS adapters (keystone-idempotency/http, keystone-idempotency/sqs).
 */
export { type Clock, type IdSource, randomIds, systemClock } from './clock.js';
export {
  type ClaimOptions,
  type ClaimOutcome,
  DEFAULT_LEASE_SECONDS,
  DEFAULT_TTL_SECONDS,
  type DueOperation,
  type EffectOf,
  type FindDueOptions,
  type IdempotencyStore,
  type OneShotContext,
  type OneShotOutcome,
  type ResumeOptions,
  type ResumeOutcome,
} from './contract.js';
export { type Decision, decide, isExpired, isOwnCompletion, leaseOf } from './decide.js';
export * from './errors.js';
export { type FingerprintInput, fingerprint } from './fingerprint.js';
export {
  joinScopedKey,
  type KeyScope,
  MAX_KEY_LENGTH,
  parseIdempotencyKey,
  scopedKey,
  splitScopedKey,
} from './key.js';
export { type MakeIdempotentOptions, makeIdempotent } from './make-idempotent.js';
export { type AttemptEnd, ClaimedOperation, type IdempotencyHandle, type Settlement } from './operation.js';
export { type IdempotencyRecord, type Lease, RecordStatus, type StoredResponse } from './record.js';
export {
  type RecoverDueOptions,
  type RecoveryReport,
  type RecoveryResolver,
  type RecoveryVerdict,
  recoverDue,
} from './recovery.js';
export { resultOf, storedResult } from './result.js';
export {
  type Began,
  beginOperation,
  claimOptions,
  type InvocationTime,
  LEASE_MARGIN_MS,
  type LifecycleOptions,
  type OperationIdentity,
  type OperationWork,
  type RunOutcome,
  runIdempotently,
  WAIT_MARGIN_MS,
} from './run.js';
