import { type DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { type ApiKeyDirectory, hashApiKey } from './api-keys';

/**
 * API keys on DynamoDB, in the payments table. A module of its own, apart from the store-neutral api-keys.ts, so that
 * a function bundled for PostgreSQL carries no DynamoDB client (the SDK's modules are not free of side effects, so
 * esbuild keeps whatever a bundle imports, used or not).
 */
const apiKeyItemKey = (hash: string) => ({ pk: `APIKEY#${hash}`, sk: 'APIKEY' });

/** API keys in the payments table on DynamoDB. */
export class ApiKeys implements ApiKeyDirectory {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  /** The account an API key belongs to, or undefined for an unknown or revoked key. */
  async accountFor(apiKey: string): Promise<string | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: apiKeyItemKey(hashApiKey(apiKey)) }),
    );
    if (!Item || Item.revoked === true) return undefined;
    return Item.account_id as string;
  }

  async register(apiKey: string, accountId: string): Promise<void> {
    await this.client.send(
      new PutCommand({
        TableName: this.tableName,
        Item: { ...apiKeyItemKey(hashApiKey(apiKey)), account_id: accountId, created_at: new Date().toISOString() },
      }),
    );
  }
}
