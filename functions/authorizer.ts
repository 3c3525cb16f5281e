import { Logger } from '@aws-lambda-powertools/logger';
import middy from '@middy/core';
import type { APIGatewayAuthorizerResult, APIGatewayTokenAuthorizerEvent } from 'aws-lambda';
import { apiKeys } from '../lib/payments/config';
import { documentClient } from '../lib/runtime/clients';
import { tracing } from '../lib/runtime/tracing';

/**
 * TOKEN authorizer: `Authorization: Bearer <api key>` becomes the account id in the request context. An unknown or
 * malformed key throws 'Unauthorized', which API Gateway answers with 401.
 */
const logger = new Logger({ serviceName: 'payments-authorizer' });
const keys = apiKeys();

async function authorize(event: APIGatewayTokenAuthorizerEvent): Promise<APIGatewayAuthorizerResult> {
  const match = /^Bearer\s+(\S+)$/i.exec(event.authorizationToken ?? '');
  const accountId = match?.[1] ? await keys.accountFor(match[1]) : undefined;
  if (!accountId) {
    logger.info('rejected an API key');
    throw new Error('Unauthorized');
  }
  return {
    principalId: accountId,
    // The policy is cached per token for every route of the API, so it allows the whole API, not just this method.
    policyDocument: {
      Version: '2012-10-17',
      Statement: [{ Action: 'execute-api:Invoke', Effect: 'Allow', Resource: apiWideArn(event.methodArn) }],
    },
    context: { accountId },
  };
}

export const handler = middy<APIGatewayTokenAuthorizerEvent, APIGatewayAuthorizerResult>(authorize).use(
  tracing('payments-authorizer', [documentClient()]),
);

/** arn:aws:execute-api:region:account:apiId/stage/METHOD/path → arn:aws:execute-api:region:account:apiId/stage/* */
function apiWideArn(methodArn: string): string {
  const [prefix, stage] = methodArn.split('/');
  return `${prefix}/${stage}/*`;
}
