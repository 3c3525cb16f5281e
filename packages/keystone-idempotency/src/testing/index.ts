/**
 * Tests a store of your own can run: the store contract suite that proves the package's DynamoDB and PostgreSQL
 * stores, published so that a store over a driver of your own (`DriverStore`, `IdempotencyDriver` in
 * `keystone-idempotency/engine`) is proven by the same cases against your real database. One call registers them with
 * the host framework (jest, or vitest with globals, or the `describe`/`it` you pass); they assert with node:assert
 * alone, so this entry point depends on no test framework.
 */
export type { TestFramework } from './framework.js';
export {
  type ContractStoreOptions,
  describeStoreContract,
  type LostReplyStep,
  type StoreContractHarness,
  type StoreContractOptions,
} from './store-contract.js';
