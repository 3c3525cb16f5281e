import { randomUUID } from 'node:crypto';
import { DynamoDBClient, type DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { TableDefinition } from '../../lib/tables/definitions';
import { ensureTable } from '../../lib/tables/ensure';

/** A client for the DynamoDB Local that the jest global setup started. */
export function localClient(overrides: Partial<DynamoDBClientConfig> = {}): DynamoDBClient {
  const endpoint = process.env.DYNAMODB_ENDPOINT;
  if (!endpoint) throw new Error('DYNAMODB_ENDPOINT is not set: run tests through jest (global setup starts it)');
  return new DynamoDBClient({
    endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    ...overrides,
  });
}

export function localDocumentClient(client = localClient()): DynamoDBDocumentClient {
  return DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
}

/** Creates a uniquely named table from a definition, so test files never share data. */
export async function createTestTable(client: DynamoDBClient, definition: TableDefinition): Promise<string> {
  const name = `${definition.id}-${randomUUID().slice(0, 8)}`;
  await ensureTable(client, definition, name);
  return name;
}
