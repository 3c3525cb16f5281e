import type { DynamoDbLocal } from '../../lib/local/dynamodb-local';
import type { PostgresLocal } from '../../lib/local/postgres-local';

export default async function globalTeardown(): Promise<void> {
  const started = globalThis as { __dynamoDbLocal__?: DynamoDbLocal; __postgresLocal__?: PostgresLocal };
  await Promise.all([started.__dynamoDbLocal__?.stop(), started.__postgresLocal__?.stop()]);
}
