import type { DynamoDbLocal } from '@keystone-idempotency/local-aws/dynamodb-local';
import type { PostgresLocal } from '@keystone-idempotency/local-aws/postgres-local';

export default async function globalTeardown(): Promise<void> {
  const started = globalThis as { __dynamoDbLocal__?: DynamoDbLocal; __postgresLocal__?: PostgresLocal };
  const { __dynamoDbLocal__: dynamoDb, __postgresLocal__: postgres } = started;
  // Each project's teardown runs (jest.config.js has two): the first stops the servers, the next finds none.
  started.__dynamoDbLocal__ = undefined;
  started.__postgresLocal__ = undefined;
  await Promise.all([dynamoDb?.stop(), postgres?.stop()]);
}
