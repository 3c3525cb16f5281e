import { DynamoDbStore, type EffectItem } from 'keystone-idempotency/dynamodb';
import { DynamoDbOrders } from '../orders/dynamodb';
import { documentClient } from '../runtime/clients';
import { requireEnv } from '../runtime/env';
import { idempotencyTable, paymentsTable } from '../tables/definitions';
import { ApiKeys } from './api-keys-dynamodb';
import type { ServiceData } from './config';
import { lifetimes } from './lifetimes';
import { PaymentsStore } from './store';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * The service's data on DynamoDB, typed by its transaction items (the bench builds its variants from it). Each part
 * is built when first used, so a function needs only the tables it touches (the authorizer has no idempotency table).
 */
export function dynamoDbData(env: Env = process.env): ServiceData<EffectItem> {
  const client = documentClient(env);
  const store = once(
    () => new DynamoDbStore({ client, tableName: requireEnv(idempotencyTable.envVar, env), ...lifetimes(env) }),
  );
  const payments = once(() => new PaymentsStore(client, requireEnv(paymentsTable.envVar, env)));
  const orders = once(() => new DynamoDbOrders(client, requireEnv(paymentsTable.envVar, env)));
  const apiKeys = once(() => new ApiKeys(client, requireEnv(paymentsTable.envVar, env)));
  return {
    kind: 'dynamodb',
    get store() {
      return store();
    },
    get payments() {
      return payments();
    },
    get orders() {
      return orders();
    },
    get apiKeys() {
      return apiKeys();
    },
    tracedClients: [client],
    purgeExpired: async () => 0,
  };
}

/** A part built on first use, then the same one every time. */
export function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => {
    made ??= { value: make() };
    return made.value;
  };
}
