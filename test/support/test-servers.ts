import { type DynamoDbLocal, startDynamoDbLocal } from '@keystone-idempotency/local-aws/dynamodb-local';
import { type PostgresLocal, startPostgresLocal } from '@keystone-idempotency/local-aws/postgres-local';

/**
 * DynamoDB Local and PostgreSQL for a run, each on a free port, started side by side; an address already given
 * (DYNAMODB_ENDPOINT, POSTGRES_URL) is used instead of starting one. The addresses of those started are set in the
 * environment, which jest's workers and a mutation run's jest inherit. Answers the servers it started (the caller
 * stops them).
 */
export async function startTestServers(): Promise<[DynamoDbLocal | undefined, PostgresLocal | undefined]> {
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
  return [dynamoDb, postgres];
}
