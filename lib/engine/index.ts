/**
 * The idempotency engine: keys, fingerprints, the pure decision, the DynamoDB store, the operation handle every
 * adapter gives its work, recovery, and `makeIdempotent` for any function. Runtime code only (no CDK, no middy):
 * the HTTP and SQS adapters live beside it (keystone-idempotency/http, keystone-idempotency/sqs).
 */
export { type Clock, type IdSource, randomIds, systemClock } from './clock.js';
export { type Decision, decide, isExpired } from './decide.js';
export * from './errors.js';
export { type FingerprintInput, fingerprint } from './fingerprint.js';
export { type KeyScope, MAX_KEY_LENGTH, parseIdempotencyKey, scopedKey } from './key.js';
export { KEY_ATTRIBUTE, RECOVERY_INDEX, RECOVERY_SHARDS, RecordAttribute, TTL_ATTRIBUTE } from './layout.js';
export { type MakeIdempotentOptions, makeIdempotent } from './make-idempotent.js';
export { ClaimedOperation, type IdempotencyHandle, MAX_STAGED_EFFECTS } from './operation.js';
export { type IdempotencyRecord, type Lease, RecordStatus, type StoredResponse } from './record.js';
export {
  type RecoverDueOptions,
  type RecoveryReport,
  type RecoveryResolver,
  type RecoveryVerdict,
  recoverDue,
} from './recovery.js';
export { resultOf, storedResult } from './result.js';
export { type OperationIdentity, type OperationWork, type RunOutcome, runIdempotently } from './run.js';
export {
  type ClaimOptions,
  type ClaimOutcome,
  DEFAULT_LEASE_SECONDS,
  DEFAULT_MAX_RESPONSE_BYTES,
  DEFAULT_TTL_SECONDS,
  type DueOperation,
  type EffectItem,
  IdempotencyStore,
  type IdempotencyStoreOptions,
  type OneShotContext,
  type OneShotOutcome,
  type ResumeOptions,
  type ResumeOutcome,
  recoveryShardOf,
} from './store.js';
