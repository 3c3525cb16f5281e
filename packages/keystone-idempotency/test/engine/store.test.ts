import { describeStoreContract } from '../../src/testing';
import { storeHarnesses } from '../support/stores';

/**
 * The store contract (packages/keystone-idempotency/src/engine/contract.ts), one suite run against every store:
 * DynamoDB (Local) and PostgreSQL, each real. The suite is the published one (`keystone-idempotency/testing`), so
 * what proves the package's own stores is what a team runs against a store of its own. What is particular to one
 * store (DynamoDB's request kinds, PostgreSQL's pipelining and lock waits) is tested in test/dynamodb and
 * test/postgres.
 */
for (const [name, harness] of storeHarnesses) describeStoreContract({ name, setup: harness });
