/**
 * The engine's store on DynamoDB: `DynamoDbStore` (claim, commit with staged transaction items, release, recovery),
 * the table layout it needs (a string partition key, TTL on the expiry attribute, the sparse recovery index), and the
 * effect type handlers stage: a TransactWriteItems action; and natural idempotency on DynamoDB (put-if-absent,
 * compare-and-set, upsert), in the same shape as PostgreSQL's.
 */
export { InvalidNaturalRequestError, NaturalIdempotencyError } from '../engine/errors.js';
export { KEY_ATTRIBUTE, RECOVERY_INDEX, RECOVERY_SHARDS, RecordAttribute, TTL_ATTRIBUTE } from './layout.js';
export {
  type CompareAndSetInput,
  type CompareAndSetResult,
  compareAndSet,
  compareAndSetEffect,
  type PutIfAbsentInput,
  type PutIfAbsentResult,
  putIfAbsent,
  type UpsertInput,
  upsert,
  upsertEffect,
} from './natural/index.js';
export { recoveryShardOf } from './recovery-index.js';
export {
  DEFAULT_MAX_RESPONSE_BYTES,
  DynamoDbStore,
  type DynamoDbStoreOptions,
  type EffectItem,
  MAX_TRANSACTION_EFFECTS,
} from './store.js';
export {
  IDEMPOTENCY_TABLE,
  IDEMPOTENCY_TABLE_ACTIONS,
  type IdempotencyTableOptions,
  type IdempotencyTableResourceOptions,
  idempotencyTableRequests,
  idempotencyTableResource,
} from './table.js';
