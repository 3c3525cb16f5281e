import { ConfigurationError, type IdempotencyStore } from 'keystone-idempotency/engine';
import type { OrdersRepository } from '../orders/repository';
import type { documentClient } from '../runtime/clients';
import { numberEnv, requireEnv } from '../runtime/env';
import { DEFAULT_CALL_TIMEOUTS_MS } from '../timing/timing';
import type { ApiKeyDirectory } from './api-keys';
import { dynamoDbData } from './data-dynamodb';
import { postgresData } from './data-postgres';
import { ProcessorClient } from './processor-client';
import type { PaymentsRepository } from './store';
import { STORE_KINDS, type StoreKind } from './store-kind';

type Env = Readonly<Record<string, string | undefined>>;

export { STORE_KINDS, type StoreKind } from './store-kind';

/** Which database the service runs on: `STORE`, `dynamodb` (the default) or `postgres`. */
export function storeKind(env: Env = process.env): StoreKind {
  const kind = env.STORE || 'dynamodb';
  if (!(STORE_KINDS as readonly string[]).includes(kind)) {
    throw new ConfigurationError(`environment variable STORE must be one of ${STORE_KINDS.join(', ')}, got ${kind}`);
  }
  return kind as StoreKind;
}

/**
 * The service's data on one database: the idempotency store and the service's own tables, with writes typed as that
 * store's effects so that a payment row always commits with its key's completion. Handlers are written once, for any
 * effect type; which one runs is the deployment's `STORE`.
 */
export interface ServiceData<TEffect> {
  readonly kind: StoreKind;
  readonly store: IdempotencyStore<TEffect>;
  readonly payments: PaymentsRepository<TEffect>;
  /** Orders, their reservations and the stock (lib/orders), in the same database. */
  readonly orders: OrdersRepository<TEffect>;
  readonly apiKeys: ApiKeyDirectory;
  /** The AWS SDK clients the data is read and written through, for the tracer to record (none on PostgreSQL). */
  readonly tracedClients: readonly ReturnType<typeof documentClient>[];
  /**
   * Deletes records past their expiry, a batch at a time, where the database does not do it itself (PostgreSQL;
   * DynamoDB's TTL does it there). The completer calls it after each run. Returns the rows deleted.
   */
  purgeExpired(): Promise<number>;
}

/** The service's data for this container, built once per environment object (at cold start). */
export function serviceData(env: Env = process.env): ServiceData<unknown> {
  let data = built.get(env);
  if (!data) {
    data = dataOn(storeKind(env), env);
    built.set(env, data);
  }
  return data;
}

/**
 * Each store's code is loaded only where it can run: a deployed bundle is built for one store (`process.env.STORE` is
 * a constant there, lib/infra/service-function.ts), and esbuild drops the branch that is false at bundle time, and
 * with it the other store's module (the package has no side effects), so a DynamoDB function carries neither pg
 * nor the RDS signer.
 * Run from source, both are there.
 */
function dataOn(kind: StoreKind, env: Env): ServiceData<unknown> {
  if (kind === 'postgres') {
    if (process.env.STORE !== 'dynamodb') return postgresData(env);
  } else if (process.env.STORE !== 'postgres') {
    return dynamoDbData(env);
  }
  throw new ConfigurationError(`this function was bundled for STORE=${process.env.STORE}, and runs with STORE=${kind}`);
}

const built = new WeakMap<Env, ServiceData<unknown>>();

export function processorClient(env: Env = process.env): ProcessorClient {
  return new ProcessorClient({
    baseUrl: requireEnv('PROCESSOR_URL', env),
    timeoutMs: numberEnv('PROCESSOR_TIMEOUT_MS', DEFAULT_CALL_TIMEOUTS_MS.processor, env),
  });
}
