import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { DynamoDbStore } from 'keystone-idempotency/dynamodb';
import type { IdempotencyStore } from 'keystone-idempotency/engine';
import { PostgresStore } from 'keystone-idempotency/postgres';
import { Pool } from 'pg';
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
    close: async () => doc.destroy(),
  };
}

/** The store the end-to-end suites run on: jest's `postgres` project sets E2E_STORE (jest.config.js). */
export function e2eStore(): StoreKind {
  return process.env.E2E_STORE === 'postgres' ? 'postgres' : 'dynamodb';
}
