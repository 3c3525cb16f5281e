/**
 * Natural idempotency for DynamoDB: operations that are safe to repeat by their own construction, with no key
 * store. Expected outcomes are values (`created` / `exists`, `changed` / `unchanged` / `missing`), not exceptions.
 */
export {
  type CompareAndSetInput,
  type CompareAndSetResult,
  compareAndSet,
  compareAndSetItem,
} from './compare-and-set.js';
export { InvalidNaturalRequestError, NaturalIdempotencyError } from './errors.js';
export { type PutIfAbsentInput, type PutIfAbsentResult, putIfAbsent } from './put-if-absent.js';
export { type UpsertInput, upsert, upsertItem } from './upsert.js';
