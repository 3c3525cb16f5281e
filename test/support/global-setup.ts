import { type DynamoDbLocal, startDynamoDbLocal } from '@keystone-idempotency/local-aws/dynamodb-local';
import { type PostgresLocal, startPostgresLocal } from '@keystone-idempotency/local-aws/postgres-local';

/**
 * One DynamoDB Local and one PostgreSQL for the whole run, each on a free port, started side by side. Workers inherit
 * their addresses through the environment; each test file creates its own uniquely named tables (DynamoDB) or schema
 * (PostgreSQL), so files never see each other's data. An address already given (DYNAMODB_ENDPOINT, POSTGRES_URL)
 * is used instead of starting one.
 */
export default async function globalSetup(): Promise<void> {
  const [dynamoDb, postgres] = await Promise.all([
    process.env.DYNAMODB_ENDPOINT ? undefined : startDynamoDbLocal(),
    process.env.POSTGRES_URL ? undefined : startPostgresLocal(),
  ]);
  if (dynamoDb) {
    process.env.DYNAMODB_ENDPOINT = dynamoDb.endpoint;
    process.env.AWS_REGION ??= 'local';
    process.env.AWS_ACCESS_KEY_ID ??= 'local';
    process.env.AWS_SECRET_ACCESS_KEY ??= 'local';
  }
  if (postgres) process.env.POSTGRES_URL = postgres.url;
  const started = globalThis as { __dynamoDbLocal__?: DynamoDbLocal; __postgresLocal__?: PostgresLocal };
  // Jest runs each project's global setup (jest.config.js has two): the second finds both addresses given.
  if (dynamoDb) started.__dynamoDbLocal__ = dynamoDb;
  if (postgres) started.__postgresLocal__ = postgres;
  // Nothing started (both given: the second project, or a mutation run calling jest once per mutant): nothing to kill.
  if (!dynamoDb && !postgres) return;
  const killNow = () => {
    for (const server of [dynamoDb, postgres]) {
      if (!server) continue;
      try {
        process.kill(-server.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };
  process.once('exit', killNow);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      killNow();
      process.exit(130);
    });
  }
}
