import { DynamoDbStore } from 'keystone-idempotency/dynamodb';
import { DEFAULT_LEASE_SECONDS, DEFAULT_TTL_SECONDS } from 'keystone-idempotency/engine';
import { documentClient } from '../runtime/clients';
import { numberEnv, requireEnv } from '../runtime/env';
import { idempotencyTable, paymentsTable } from '../tables/definitions';
import { ApiKeys } from './api-keys';
import { ProcessorClient } from './processor-client';
import { PaymentsStore } from './store';

type Env = Readonly<Record<string, string | undefined>>;

/** The payments service's collaborators, built once per container from its environment. */
export function paymentsStore(env: Env = process.env): PaymentsStore {
  return new PaymentsStore(documentClient(env), requireEnv(paymentsTable.envVar, env));
}

export function apiKeys(env: Env = process.env): ApiKeys {
  return new ApiKeys(documentClient(env), requireEnv(paymentsTable.envVar, env));
}

export function idempotencyStore(env: Env = process.env): DynamoDbStore {
  return new DynamoDbStore({
    client: documentClient(env),
    tableName: requireEnv(idempotencyTable.envVar, env),
    leaseSeconds: numberEnv('IDEMPOTENCY_LEASE_SECONDS', DEFAULT_LEASE_SECONDS, env),
    ttlSeconds: numberEnv('IDEMPOTENCY_TTL_SECONDS', DEFAULT_TTL_SECONDS, env),
  });
}

export function processorClient(env: Env = process.env): ProcessorClient {
  return new ProcessorClient({
    baseUrl: requireEnv('PROCESSOR_URL', env),
    timeoutMs: numberEnv('PROCESSOR_TIMEOUT_MS', 8000, env),
  });
}
