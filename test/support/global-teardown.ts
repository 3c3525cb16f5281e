import type { DynamoDbLocal } from '../../lib/local/dynamodb-local';

export default async function globalTeardown(): Promise<void> {
  await (globalThis as { __dynamoDbLocal__?: DynamoDbLocal }).__dynamoDbLocal__?.stop();
}
