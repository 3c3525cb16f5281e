import { DynamoDBClient, type DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Client settings from the environment. In Lambda nothing is set here and the SDK's defaults apply. Locally,
 * `DYNAMODB_ENDPOINT` points at DynamoDB Local; without AWS credentials or a region in the environment, harmless
 * local ones are filled in so the SDK doesn't go looking for real ones.
 */
export function dynamoDbConfig(env: Env = process.env): DynamoDBClientConfig {
  const endpoint = env.DYNAMODB_ENDPOINT;
  if (!endpoint) return {};
  return {
    endpoint,
    region: env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? 'local',
    ...(env.AWS_ACCESS_KEY_ID ? {} : { credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }),
  };
}

const clients = new WeakMap<Env, DynamoDBDocumentClient>();

/**
 * One DocumentClient per container (per environment object), created at cold start and shared by every store and
 * every invocation: one connection pool, however many collaborators a function builds from its environment.
 */
export function documentClient(env: Env = process.env): DynamoDBDocumentClient {
  let client = clients.get(env);
  if (!client) {
    client = DynamoDBDocumentClient.from(new DynamoDBClient(dynamoDbConfig(env)), {
      marshallOptions: { removeUndefinedValues: true },
    });
    clients.set(env, client);
  }
  return client;
}
