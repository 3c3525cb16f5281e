import { startDynamoDbLocal } from '../../lib/local/dynamodb-local';

/**
 * One DynamoDB Local for the whole run, on a free port. Workers inherit the endpoint through the environment;
 * each test file creates its own uniquely named tables, so files never see each other's data.
 */
export default async function globalSetup(): Promise<void> {
  if (process.env.DYNAMODB_ENDPOINT) return; // an already running instance was given
  const db = await startDynamoDbLocal();
  process.env.DYNAMODB_ENDPOINT = db.endpoint;
  process.env.AWS_REGION ??= 'local';
  process.env.AWS_ACCESS_KEY_ID ??= 'local';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'local';
  (globalThis as { __dynamoDbLocal__?: typeof db }).__dynamoDbLocal__ = db;
  const killNow = () => {
    try {
      process.kill(-db.pid, 'SIGKILL');
    } catch {
      // already gone
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
