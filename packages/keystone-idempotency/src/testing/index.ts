/**
 * Tests a store of your own can run: the store contract suite and the model-based protocol test that prove the
 * package's DynamoDB and PostgreSQL stores, published so that a store over a driver of your own (`DriverStore`,
 * `IdempotencyDriver` in `keystone-idempotency/engine`) is proven by the same cases against your real database. One
 * call registers each with the host framework (jest, or vitest with globals, or the `describe`/`it` you pass); they
 * assert with node:assert alone, so this entry point depends on no test framework. The model test needs `fast-check`
 * (an optional peer), loaded only when it runs.
 */
export type { TestFramework } from './framework.js';
export { ManualClock } from './manual-clock.js';
export {
  Delivery,
  describeProtocolModel,
  type EffectRow,
  type ProtocolBackend,
  type ProtocolModelOptions,
  type StoredItem,
  type StoreSettings,
} from './protocol-model.js';
export {
  type ContractStoreOptions,
  describeStoreContract,
  type LostReplyStep,
  type StoreContractHarness,
  type StoreContractOptions,
} from './store-contract.js';
