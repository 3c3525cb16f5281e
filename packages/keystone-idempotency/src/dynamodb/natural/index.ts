/**
 * Natural idempotency on DynamoDB: operations that are safe to repeat by their own construction, with no key store.
 * The same three as PostgreSQL's (`keystone-idempotency/postgres`), in the same shape: `putIfAbsent(client, input)`,
 * `compareAndSet(client, input)` and `upsert(client, input)`, with `compareAndSetEffect` and `upsertEffect` to stage
 * into an engine commit (here a transaction item); each input in the store's own terms (`TableName`, `Key`, `Item`
 * here; `table`, `key`, `row` there). Expected outcomes are values (`created` / `exists`, `changed` / `unchanged` /
 * `missing`), not exceptions.
 */
export {
  type CompareAndSetInput,
  type CompareAndSetResult,
  compareAndSet,
  compareAndSetEffect,
} from './compare-and-set.js';
export { type PutIfAbsentInput, type PutIfAbsentResult, putIfAbsent } from './put-if-absent.js';
export { type UpsertInput, upsert, upsertEffect } from './upsert.js';
