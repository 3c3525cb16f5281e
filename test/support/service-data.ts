import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { DynamoDbStore } from 'keystone-idempotency/dynamodb';
import type { IdempotencyStore } from 'keystone-idempotency/engine';
import { PostgresStore } from 'keystone-idempotency/postgres';
import { Pool } from 'pg';
import { DynamoDbOrders } from '../../lib/orders/dynamodb';
import { PostgresOrders } from '../../lib/orders/postgres';
import type { OrdersRepository } from '../../lib/orders/repository';
import type { StoreKind } from '../../lib/payments/config';
import type { Payment } from '../../lib/payments/schema';
import { localDocumentClient } from './dynamodb';

/**
 * What a stack wrote, read back the way the service's own store reads it, on either database: an end-to-end test's
 * witness for "the record says so" and "exactly one payment row", without a line of DynamoDB or SQL in the test.
 */
export interface ServiceInspector {
  /** The idempotency store over the stack's own table or schema (its `get` treats an expired record as absent). */
  readonly store: IdempotencyStore<unknown>;
  /** Every payment row of an account, read from the database itself, with the downstream key it was made under. */
  payments(accountId: string): Promise<(Payment & { readonly downstream_key: string })[]>;
  /** The ids of every order row of an account, read from the database itself. */
  orderIds(accountId: string): Promise<string[]>;
  /** The reservations held or released for an order (0 or 1 rows: the witness for "reserved once"). */
  reservations(orderId: string): Promise<{ readonly state: string; readonly items: unknown }[]>;
  /** The service's own orders repository over the stack's data (its reads: orders and stock). */
  readonly orders: OrdersRepository<unknown>;
  close(): Promise<void>;
}

export type StoreLocation =
  | { readonly kind: 'dynamodb'; readonly idempotencyTable: string; readonly paymentsTable: string }
  | { readonly kind: 'postgres'; readonly url: string; readonly schema: string };

export function inspectService(location: StoreLocation): ServiceInspector {
  if (location.kind === 'postgres') {
    const pool = new Pool({ connectionString: location.url, max: 2 });
    return {
      store: new PostgresStore({ pool, schema: location.schema }),
      async payments(accountId) {
        const { rows } = await pool.query(
          `SELECT * FROM "${location.schema}".payments WHERE account_id = $1 ORDER BY created_at`,
          [accountId],
        );
        return rows.map((row) => ({
          ...row,
          created_at: (row.created_at as Date).toISOString(),
          settled_at: (row.settled_at as Date | null)?.toISOString() ?? null,
        }));
      },
      async orderIds(accountId) {
        const { rows } = await pool.query(`SELECT id FROM "${location.schema}".orders WHERE account_id = $1`, [
          accountId,
        ]);
        return rows.map((row) => row.id as string);
      },
      async reservations(orderId) {
        const { rows } = await pool.query(
          `SELECT state, items FROM "${location.schema}".reservations WHERE order_id = $1`,
          [orderId],
        );
        return rows as { state: string; items: unknown }[];
      },
      orders: new PostgresOrders(pool, { schema: location.schema }) as OrdersRepository<unknown>,
      close: () => pool.end(),
    };
  }
  const doc = localDocumentClient();
  return {
    store: new DynamoDbStore({ client: doc, tableName: location.idempotencyTable }),
    async payments(accountId) {
      const rows: (Payment & { downstream_key: string })[] = [];
      let start: Record<string, unknown> | undefined;
      do {
        const page = await doc.send(
          new QueryCommand({
            TableName: location.paymentsTable,
            KeyConditionExpression: 'pk = :pk AND begins_with(sk, :payment)',
            ExpressionAttributeValues: { ':pk': `ACCOUNT#${accountId}`, ':payment': 'PAYMENT#' },
            ConsistentRead: true,
            ...(start ? { ExclusiveStartKey: start } : {}),
          }),
        );
        rows.push(...((page.Items ?? []) as (Payment & { downstream_key: string })[]));
        start = page.LastEvaluatedKey;
      } while (start);
      return rows;
    },
    async orderIds(accountId) {
      const ids: string[] = [];
      let start: Record<string, unknown> | undefined;
      do {
        const page = await doc.send(
          new QueryCommand({
            TableName: location.paymentsTable,
            KeyConditionExpression: 'pk = :pk AND begins_with(sk, :order)',
            ExpressionAttributeValues: { ':pk': `ACCOUNT#${accountId}`, ':order': 'ORDER#' },
            ConsistentRead: true,
            ...(start ? { ExclusiveStartKey: start } : {}),
          }),
        );
        ids.push(...(page.Items ?? []).map((item) => item.id as string));
        start = page.LastEvaluatedKey;
      } while (start);
      return ids;
    },
    async reservations(orderId) {
      const { Items } = await doc.send(
        new QueryCommand({
          TableName: location.paymentsTable,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': `ORDER#${orderId}` },
          ConsistentRead: true,
        }),
      );
      return (Items ?? []) as { state: string; items: unknown }[];
    },
    orders: new DynamoDbOrders(doc, location.paymentsTable) as OrdersRepository<unknown>,
    close: async () => doc.destroy(),
  };
}

/** The store the end-to-end suites run on: jest's `postgres` project sets E2E_STORE (jest.config.js). */
export function e2eStore(): StoreKind {
  return process.env.E2E_STORE === 'postgres' ? 'postgres' : 'dynamodb';
}
