import { randomUUID } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { idempotencyTable, paymentsTable, type TableDefinition } from '../../lib/tables/definitions';
import { ensureTable } from '../../lib/tables/ensure';
// The client for the DynamoDB Local that jest's global setup started: the library's own fixture, one copy.
import { localClient, localDocumentClient } from '../../packages/keystone-idempotency/test/support/dynamodb';
import { countRequests } from './request-counter';

export { localClient, localDocumentClient };

/** Creates a uniquely named table from a definition, so test files never share data. */
export async function createTestTable(client: DynamoDBClient, definition: TableDefinition): Promise<string> {
  const name = `${definition.id}-${randomUUID().slice(0, 8)}`;
  await ensureTable(client, definition, name);
  return name;
}

/**
 * The DynamoDB a test file works against: a client for DynamoDB Local with a request counter, and a fresh
 * idempotency table and payments table created in `beforeAll` (their names are readable once it has run).
 * The client is destroyed in `afterAll`.
 */
export function testDatabase() {
  const client = localClient();
  const names = { idempotency: '', payments: '' };
  beforeAll(async () => {
    [names.idempotency, names.payments] = await Promise.all([
      createTestTable(client, idempotencyTable),
      createTestTable(client, paymentsTable),
    ]);
  });
  afterAll(() => client.destroy());
  const documentClient = localDocumentClient(client);
  return {
    client,
    doc: documentClient,
    requests: countRequests(client),
    get idempotencyTable() {
      return names.idempotency;
    },
    get paymentsTable() {
      return names.payments;
    },
    /** How many items the payments table holds under one partition key: the witness for "the effect happened". */
    async itemsUnder(pk: string): Promise<number> {
      const { Count } = await documentClient.send(
        new QueryCommand({
          TableName: names.payments,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': pk },
          Select: 'COUNT',
          ConsistentRead: true,
        }),
      );
      return Count ?? 0;
    },
  };
}
