import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  type DynamoDBClient,
  ResourceInUseException,
  ResourceNotFoundException,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import type { TableDefinition } from './definitions';

/** The CreateTable request for a definition: on-demand, like the deployed table. */
export function createTableInput(definition: TableDefinition, tableName: string): CreateTableCommandInput {
  const keys = [definition.partitionKey, ...(definition.sortKey ? [definition.sortKey] : [])];
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: keys.map((key) => ({ AttributeName: key.name, AttributeType: key.type })),
    KeySchema: keys.map((key, index) => ({ AttributeName: key.name, KeyType: index === 0 ? 'HASH' : 'RANGE' })),
  };
}

/** Creates the table if it is missing (and enables TTL), leaving an existing one alone. */
export async function ensureTable(
  client: DynamoDBClient,
  definition: TableDefinition,
  tableName: string,
): Promise<void> {
  try {
    await client.send(new DescribeTableCommand({ TableName: tableName }));
    return;
  } catch (error) {
    if (!(error instanceof ResourceNotFoundException)) throw error;
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
