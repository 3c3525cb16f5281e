/**
 * The idempotency engine: runtime code only (no CDK). Adapters (HTTP, SQS) live beside it in lib/http and lib/sqs.
 */
export { type Clock, type IdSource, randomIds, systemClock } from './clock';
export { type Decision, decide, isExpired } from './decide';
export * from './errors';
export { type FingerprintInput, fingerprint } from './fingerprint';
export { type KeyScope, MAX_KEY_LENGTH, parseIdempotencyKey, scopedKey } from './key';
export { KEY_ATTRIBUTE, RECOVERY_INDEX, RECOVERY_SHARDS, RecordAttribute, TTL_ATTRIBUTE } from './layout';
export { type IdempotencyRecord, type Lease, RecordStatus, type StoredResponse } from './record';
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
} from './store';
