import { DynamoDbStore } from 'keystone-idempotency/dynamodb';
import type { IdempotencyStore } from 'keystone-idempotency/engine';
import { DynamoDbOrders } from '../../lib/orders/dynamodb';
import { ordersTablesSql, PostgresOrders } from '../../lib/orders/postgres';
import type { OrdersRepository } from '../../lib/orders/repository';
import { testDatabase } from './dynamodb';
import { testPostgres } from './postgres';

/** The orders repository and an idempotency store on one database, for tests that commit orders as the engine does. */
export interface OrdersSubject {
  readonly orders: OrdersRepository<unknown>;
  readonly store: IdempotencyStore<unknown>;
}

/**
 * The orders repository on DynamoDB Local and on PostgreSQL, each with the idempotency store beside it. Call it at a
 * test file's top level: it registers the databases' hooks and creates the orders tables on PostgreSQL.
 */
export function ordersSubjects(): Record<'dynamodb' | 'postgres', () => OrdersSubject> {
  const dynamodb = testDatabase();
  const postgres = testPostgres();
  beforeAll(() => postgres.pool.query(ordersTablesSql(postgres.schema)));
  return {
    dynamodb: () => ({
      orders: new DynamoDbOrders(dynamodb.doc, dynamodb.paymentsTable) as OrdersRepository<unknown>,
      store: new DynamoDbStore({
        client: dynamodb.doc,
        tableName: dynamodb.idempotencyTable,
      }) as IdempotencyStore<unknown>,
    }),
    postgres: () => ({
      orders: new PostgresOrders(postgres.pool, { schema: postgres.schema }) as OrdersRepository<unknown>,
      store: postgres.store() as IdempotencyStore<unknown>,
    }),
  };
}
