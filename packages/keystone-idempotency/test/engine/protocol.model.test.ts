import { describeProtocolModel } from '../../src/testing';
import { protocolBackends } from '../support/protocol/backends';

/**
 * The published model-based protocol test (`describeProtocolModel` from keystone-idempotency/testing) on the
 * package's own stores, DynamoDB Local and PostgreSQL in turn. Override the runs for a longer soak:
 * `PROTOCOL_MODEL_RUNS=2000 npx jest packages/keystone-idempotency/test/engine/protocol.model.test.ts`.
 */
const runs = Number(process.env.PROTOCOL_MODEL_RUNS ?? 50);

for (const [name, setup] of protocolBackends) describeProtocolModel({ name, setup, runs });
