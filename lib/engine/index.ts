/**
 * The idempotency engine: runtime code only (no CDK). Adapters (HTTP, SQS) live beside it in lib/http and lib/sqs.
 */
export { type Clock, type IdSource, randomIds, systemClock } from './clock.js';
export { type Decision, decide, isExpired } from './decide.js';
export * from './errors.js';
export { type FingerprintInput, fingerprint } from './fingerprint.js';
export { type KeyScope, MAX_KEY_LENGTH, parseIdempotencyKey, scopedKey } from './key.js';
export { KEY_ATTRIBUTE, RECOVERY_INDEX, RECOVERY_SHARDS, RecordAttribute, TTL_ATTRIBUTE } from './layout.js';
export { type IdempotencyRecord, type Lease, RecordStatus, type StoredResponse } from './record.js';
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
