/**
 * The idempotency engine: `makeIdempotent` for any function, the replay cache, the switch for unit tests, recovery,
 * the errors every adapter throws, and the store contract every store implements. Runtime code only, and no
 * database: the stores live beside it (keystone-idempotency/dynamodb, keystone-idempotency/postgres), as do the
 * HTTP and SQS adapters (keystone-idempotency/http, keystone-idempotency/sqs).
 *
 * What an adapter of your own needs is here too (the lifecycle: `runIdempotently`, or `beginOperation` and
 * `ClaimedOperation.settle`; keys and fingerprints). What only the package's own stores and adapters use is not
 * exported, and is marked `@internal` where it is declared.
 */

// The store contract, and what it stores.
export { type Clock, type IdSource, LEASE_MARGIN_MS, systemClock } from './clock.js';
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
  type ReleaseOptions,
  type ResumeOptions,
  type ResumeOutcome,
} from './contract.js';
export type { ClaimWriteOutcome, IdempotencyDriver, WriteOutcome } from './driver.js';
// A store of your own: a driver for its database, and the engine's one implementation of the protocol over it.
export { DriverStore } from './driver-store.js';
export * from './errors.js';
// An adapter of your own: the one lifecycle, keys and fingerprints.
export { type FingerprintInput, fingerprint } from './fingerprint.js';
export { type KeyScope, MAX_KEY_LENGTH, parseIdempotencyKey, scopedKey } from './key.js';
// Any function, made idempotent; the handle its work sees.
export { type MakeIdempotentOptions, makeIdempotent } from './make-idempotent.js';
export type { IdempotencyHandle } from './operation.js';
export { type AttemptEnd, ClaimedOperation, type OperationOptions, type Settlement } from './operation.js';
// The options every store takes for its leases and records (DynamoDbStoreOptions and PostgresStoreOptions extend it).
export type { StoreLifetimeOptions } from './ownership.js';
export { type IdempotencyRecord, type Lease, RecordStatus, type StoredResponse } from './record.js';
// Operations whose caller never came back.
export {
  type RecoverDueOptions,
  type RecoveryReport,
  type RecoveryResolver,
  type RecoveryVerdict,
  recoverDue,
} from './recovery.js';
// Warm replays with no database request; idempotency off for unit tests.
export { ReplayCache, type ReplayCacheOptions } from './replay-cache.js';
export {
  type Began,
  beginOperation,
  type InvocationTime,
  type LifecycleOptions,
  type OperationIdentity,
  type OperationWork,
  type RunOutcome,
  runIdempotently,
} from './run.js';
// Recovery points: the steps of one operation, checkpointed in its record.
export {
  DEFAULT_MAX_STEPS,
  MAX_STEP_NAME_LENGTH,
  type StepCompensation,
  type StepContext,
  type StepEvent,
  type StepJson,
  type StepLookup,
  StepMetric,
  type StepObserver,
  type StepOptions,
  type StepOutcome,
  type StepProgress,
  type StepRecord,
  StepState,
} from './steps.js';
export { IDEMPOTENCY_DISABLED_ENV } from './switch.js';
