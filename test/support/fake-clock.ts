/**
 * The library's own test fixture (packages/keystone-idempotency/test/support/fake-clock.ts),
 * used by the service's tests as it is: one copy, not two that drift.
 */
export * from '../../packages/keystone-idempotency/test/support/fake-clock';
