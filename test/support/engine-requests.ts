/**
 * The library's own test fixture (packages/keystone-idempotency/test/support/engine-requests.ts): the engine's
 * DynamoDB requests by step, for the service's fault tests through the DynamoDB fault proxy. One copy, not two that
 * drift: it knows the record's attributes, which only the library's tests may.
 */
export * from '../../packages/keystone-idempotency/test/support/engine-requests';
