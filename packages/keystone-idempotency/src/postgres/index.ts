/**
 * The engine's store on PostgreSQL: `PostgresStore` (claim, commit with SQL run in the commit's transaction, release,
 * recovery, one-shot local commits, the batch purge), the migration that creates its table, and natural idempotency
 * in SQL (put-if-absent, compare-and-set, upsert, in the same shape as DynamoDB's). Needs `pg` (an optional peer dependency, like the AWS SDK for the
 * DynamoDB store); the engine itself never imports it.
 */
export { InvalidNaturalRequestError, NaturalIdempotencyError } from '../engine/errors.js';
export type { Queryable, RetryPolicy } from './database.js';
export { MIGRATIONS, type Migration, migrate, migrationSql } from './migrate.js';
export {
  type CompareAndSetInput,
  type CompareAndSetResult,
  compareAndSet,
  compareAndSetEffect,
  type PutIfAbsentInput,
  type PutIfAbsentResult,
  putIfAbsent,
  type TableRef,
  type UpsertInput,
  upsert,
  upsertEffect,
} from './natural.js';
export {
  DEFAULT_TABLE,
  EXPECT_ROWS_SQLSTATE,
  FENCE_SQLSTATE,
  type TableNames,
  type TableOptions,
  tableNames,
} from './schema.js';
export {
  DEFAULT_LOCK_TIMEOUT_MS,
  DEFAULT_MAX_EFFECTS,
  DEFAULT_MAX_RESPONSE_BYTES,
  type PostgresEffect,
  type PostgresStatement,
  PostgresStore,
  type PostgresStoreOptions,
} from './store.js';
