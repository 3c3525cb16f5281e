import type { APIGatewayProxyResult } from 'aws-lambda';
import { documentClient } from '../lib/runtime/clients';

/**
 * The floor under both payments handlers' cold start: the DynamoDB client and DocumentClient they create at import
 * (lib/runtime/clients.ts), bundled and imported exactly like them, and nothing else. What a handler's import costs
 * beyond this is its own: validation, logging, metrics, idempotency, the handler.
 */
const client = documentClient();

export async function handler(): Promise<APIGatewayProxyResult> {
  return { statusCode: 200, body: JSON.stringify({ region: await client.config.region() }) };
}
