import type { DynamoDbLocal } from '@keystone-idempotency/local-aws/dynamodb-local';
import type { PostgresLocal } from '@keystone-idempotency/local-aws/postgres-local';
import { startTestServers } from './test-servers';

/**
 * One DynamoDB Local and one PostgreSQL for the whole run ({@link startTestServers}). Each test file creates its own
 * uniquely named tables (DynamoDB) or schema (PostgreSQL), so files never see each other's data.
 */
export default async function globalSetup(): Promise<void> {
  const [dynamoDb, postgres] = await startTestServers();
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
