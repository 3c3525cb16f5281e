import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  type DynamoDBClient,
  type GlobalSecondaryIndex,
  ResourceInUseException,
  ResourceNotFoundException,
  type TableDescription,
  UpdateTableCommand,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import type { IndexDefinition, KeyDefinition, TableDefinition } from './definitions';

/** The CreateTable request for a definition: on-demand, like the deployed table, with its indexes. */
export function createTableInput(definition: TableDefinition, tableName: string): CreateTableCommandInput {
  const indexes = definition.indexes ?? [];
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: attributeDefinitions([definition, ...indexes]),
    KeySchema: keySchema(definition),
    ...(indexes.length > 0 ? { GlobalSecondaryIndexes: indexes.map(globalSecondaryIndex) } : {}),
  };
}

/**
 * Creates the table if it is missing (and enables TTL). An existing table is left alone, except that an index the
 * definition has and the table lacks (a table made before the index existed) is added.
 */
export async function ensureTable(
  client: DynamoDBClient,
  definition: TableDefinition,
  tableName: string,
): Promise<void> {
  let existing: TableDescription | undefined;
  try {
    existing = (await client.send(new DescribeTableCommand({ TableName: tableName }))).Table;
  } catch (error) {
    if (!(error instanceof ResourceNotFoundException)) throw error;
  }
  if (existing) {
    await addMissingIndexes(client, definition, existing);
    return;
  }
  try {
    await client.send(new CreateTableCommand(createTableInput(definition, tableName)));
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error; // created concurrently
  }
  await waitUntilTableExists({ client, maxWaitTime: 60 }, { TableName: tableName });
  if (definition.ttlAttribute) {
    await client.send(
      new UpdateTimeToLiveCommand({
        TableName: tableName,
        TimeToLiveSpecification: { AttributeName: definition.ttlAttribute, Enabled: true },
      }),
    );
  }
}

async function addMissingIndexes(
  client: DynamoDBClient,
  definition: TableDefinition,
  table: TableDescription,
): Promise<void> {
  const present = new Set((table.GlobalSecondaryIndexes ?? []).map((index) => index.IndexName));
  for (const index of definition.indexes ?? []) {
    if (present.has(index.name)) continue;
    await client.send(
      new UpdateTableCommand({
        TableName: table.TableName,
        AttributeDefinitions: attributeDefinitions([index]),
        GlobalSecondaryIndexUpdates: [{ Create: globalSecondaryIndex(index) }],
      }),
    );
  }
}

function keySchema(keys: { partitionKey: KeyDefinition; sortKey?: KeyDefinition }) {
  return [
    { AttributeName: keys.partitionKey.name, KeyType: 'HASH' as const },
    ...(keys.sortKey ? [{ AttributeName: keys.sortKey.name, KeyType: 'RANGE' as const }] : []),
  ];
}

function attributeDefinitions(keyed: readonly { partitionKey: KeyDefinition; sortKey?: KeyDefinition }[]) {
  const byName = new Map<string, KeyDefinition>();
  for (const { partitionKey, sortKey } of keyed) {
    for (const key of sortKey ? [partitionKey, sortKey] : [partitionKey]) byName.set(key.name, key);
  }
  return [...byName.values()].map((key) => ({ AttributeName: key.name, AttributeType: key.type }));
}

function globalSecondaryIndex(index: IndexDefinition): GlobalSecondaryIndex {
  return { IndexName: index.name, KeySchema: keySchema(index), Projection: { ProjectionType: index.projection } };
}
