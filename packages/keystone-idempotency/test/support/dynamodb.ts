import { randomUUID } from 'node:crypto';
import {
  CreateTableCommand,
  DynamoDBClient,
  type DynamoDBClientConfig,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { idempotencyTableRequests } from '../../src/dynamodb/table';
import { countRequests } from './request-counter';

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

const uniqueName = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

/**
 * Creates a uniquely named idempotency table, so test files never share data: from the library's own description of
 * it (`idempotencyTableRequests`, the SDK requests the package README gives), recovery index and TTL included.
 */
export async function createIdempotencyTable(client: DynamoDBClient): Promise<string> {
  const name = uniqueName('Idempotency');
  const { createTable, timeToLive } = idempotencyTableRequests(name);
  await client.send(new CreateTableCommand(createTable));
  await waitUntilTableExists({ client, maxWaitTime: 60 }, { TableName: name });
  await client.send(new UpdateTimeToLiveCommand(timeToLive));
  return name;
}

/** Creates a uniquely named table of plain effect items (`pk`, `sk`, both strings), where tests write their work. */
export async function createEffectsTable(client: DynamoDBClient): Promise<string> {
  const name = uniqueName('Effects');
  await client.send(
    new CreateTableCommand({
      TableName: name,
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [
        { AttributeName: 'pk', AttributeType: 'S' },
        { AttributeName: 'sk', AttributeType: 'S' },
      ],
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
    }),
  );
  await waitUntilTableExists({ client, maxWaitTime: 60 }, { TableName: name });
  return name;
}

/**
 * The DynamoDB a test file works against: a client for DynamoDB Local with a request counter, and a fresh
 * idempotency table and effects table created in `beforeAll` (their names are readable once it has run).
 * The client is destroyed in `afterAll`.
 */
export function testDatabase() {
  const client = localClient();
  const names = { idempotency: '', effects: '' };
  beforeAll(async () => {
    [names.idempotency, names.effects] = await Promise.all([
      createIdempotencyTable(client),
      createEffectsTable(client),
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
    get effectsTable() {
      return names.effects;
    },
    /** How many items the effects table holds under one partition key: the witness for "the effect happened". */
    async itemsUnder(pk: string): Promise<number> {
      const { Count } = await documentClient.send(
        new QueryCommand({
          TableName: names.effects,
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
