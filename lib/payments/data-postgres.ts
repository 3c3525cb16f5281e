import { type PostgresEffect, PostgresStore } from 'keystone-idempotency/postgres';
import { PostgresOrders } from '../orders/postgres';
import { invocationDeadline } from '../runtime/deadline';
import { postgresPool } from '../runtime/postgres';
import type { ServiceData } from './config';
import { lifetimes } from './lifetimes';
import { PostgresApiKeys, PostgresPayments } from './postgres';

type Env = Readonly<Record<string, string | undefined>>;

/** The service's data on PostgreSQL, typed by its statements. */
export function postgresData(env: Env = process.env): ServiceData<PostgresEffect> {
  const pool = postgresPool(env);
  const schema = env.DATABASE_SCHEMA ? { schema: env.DATABASE_SCHEMA } : {};
  // Every query waits at most what the invocation has left (functions are wrapped by withInvocationDeadline).
  // Behind RDS Proxy (the deployed stack) prepared statements would pin each session: the stack turns them off.
  const prepareStatements = env.DATABASE_PREPARED_STATEMENTS !== 'false';
  const store = new PostgresStore({
    pool,
    ...schema,
    ...lifetimes(env),
    deadline: invocationDeadline,
    prepareStatements,
  });
  return {
    kind: 'postgres',
    store,
    payments: new PostgresPayments(pool, schema),
    orders: new PostgresOrders(pool, schema),
    apiKeys: new PostgresApiKeys(pool, schema),
    tracedClients: [],
    purgeExpired: () => store.purgeExpired(),
  };
}
