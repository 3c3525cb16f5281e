import { Logger } from '@aws-lambda-powertools/logger';
import middy from '@middy/core';
import type {
  APIGatewayAuthorizerResult,
  APIGatewayRequestAuthorizerEventV2,
  APIGatewaySimpleAuthorizerWithContextResult,
  APIGatewayTokenAuthorizerEvent,
  Context,
} from 'aws-lambda';
import { serviceData } from '../lib/payments/config';
import { tracing } from '../lib/runtime/tracing';

/**
 * The API's authorizer: `Authorization: Bearer <api key>` becomes the account id in the request context, for either
 * API an environment puts in front:
 * - a REST API's TOKEN authorizer: an IAM policy with `{ accountId }` as its context; an unknown or malformed key
 *   throws 'Unauthorized', which API Gateway answers with 401;
 * - an HTTP API's REQUEST authorizer (payload 2.0, simple responses): `{ isAuthorized, context: { accountId } }`; an
 *   unknown or malformed key is `isAuthorized: false`, which API Gateway answers with 403 (it answers a missing header
 *   with 401 itself, without asking).
 */
const logger = new Logger({ serviceName: 'payments-authorizer' });
const data = serviceData();
const keys = data.apiKeys;

type AuthorizerEvent = APIGatewayTokenAuthorizerEvent | APIGatewayRequestAuthorizerEventV2;
type AccountContext = { accountId: string };
type SimpleResult = APIGatewaySimpleAuthorizerWithContextResult<AccountContext | Record<string, never>>;
type AuthorizerResult = APIGatewayAuthorizerResult | SimpleResult;

async function authorize(event: AuthorizerEvent): Promise<AuthorizerResult> {
  if (isHttpApiEvent(event)) {
    const accountId = await accountFor(authorizationHeader(event));
    return accountId ? { isAuthorized: true, context: { accountId } } : { isAuthorized: false, context: {} };
  }
  const accountId = await accountFor(event.authorizationToken);
  if (!accountId) throw new Error('Unauthorized');
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

const authorizeEither = middy<AuthorizerEvent, AuthorizerResult>(authorize).use(
  tracing('payments-authorizer', data.tracedClients),
);

/** Each API's event gets its own answer: a TOKEN event an IAM policy, an HTTP API's REQUEST event a simple response. */
export function handler(event: APIGatewayTokenAuthorizerEvent, context: Context): Promise<APIGatewayAuthorizerResult>;
export function handler(event: APIGatewayRequestAuthorizerEventV2, context: Context): Promise<SimpleResult>;
export function handler(event: AuthorizerEvent, context: Context): Promise<AuthorizerResult> {
  return authorizeEither(event, context);
}

async function accountFor(authorization: string | undefined): Promise<string | undefined> {
  const match = /^Bearer\s+(\S+)$/i.exec(authorization ?? '');
  const accountId = match?.[1] ? await keys.accountFor(match[1]) : undefined;
  if (!accountId) logger.info('rejected an API key');
  return accountId;
}

function isHttpApiEvent(event: AuthorizerEvent): event is APIGatewayRequestAuthorizerEventV2 {
  return (event as { version?: unknown }).version === '2.0';
}

/** Payload 2.0 lower-cases header names; the identity source is the same header, should headers be absent. */
function authorizationHeader(event: APIGatewayRequestAuthorizerEventV2): string | undefined {
  const fromHeaders = Object.entries(event.headers ?? {}).find(([name]) => name.toLowerCase() === 'authorization');
  return fromHeaders?.[1] ?? event.identitySource?.[0];
}

/** arn:aws:execute-api:region:account:apiId/stage/METHOD/path → arn:aws:execute-api:region:account:apiId/stage/* */
function apiWideArn(methodArn: string): string {
  const [prefix, stage] = methodArn.split('/');
  return `${prefix}/${stage}/*`;
}
