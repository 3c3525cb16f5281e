import type { APIGatewayRequestAuthorizerEventV2, APIGatewayTokenAuthorizerEvent } from 'aws-lambda';
import { generateApiKey } from '../../lib/payments/api-keys';
import { ApiKeys } from '../../lib/payments/api-keys-dynamodb';
import { lambdaContext } from '../support/api-event';
import { testDatabase } from '../support/dynamodb';

/**
 * The deployed authorizer, against DynamoDB Local, as each API invokes it: a REST API's TOKEN authorizer event, and an
 * HTTP API's REQUEST authorizer event (payload 2.0, simple responses), which the stack uses with `api: 'http'`.
 */
const db = testDatabase();
let handler: typeof import('../../functions/authorizer')['handler'];
const key = generateApiKey();

beforeAll(async () => {
  // The function reads its configuration at import (cold start), as in Lambda.
  const env = { PAYMENTS_TABLE: db.paymentsTable, POWERTOOLS_LOG_LEVEL: 'SILENT' };
  const saved = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
  Object.assign(process.env, env);
  try {
    ({ handler } = await import('../../functions/authorizer'));
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
  await new ApiKeys(db.doc, db.paymentsTable).register(key, 'acct_auth');
});

const METHOD_ARN = 'arn:aws:execute-api:eu-west-1:123456789012:restapi01/v1/POST/payments';

function tokenEvent(authorizationToken: string): APIGatewayTokenAuthorizerEvent {
  return { type: 'TOKEN', methodArn: METHOD_ARN, authorizationToken };
}

function requestEvent(authorization: string): APIGatewayRequestAuthorizerEventV2 {
  return {
    version: '2.0',
    type: 'REQUEST',
    routeArn: 'arn:aws:execute-api:eu-west-1:123456789012:httpapi01/v1/POST/payments',
    identitySource: [authorization],
    routeKey: 'POST /payments',
    rawPath: '/v1/payments',
    rawQueryString: '',
    cookies: [],
    headers: { authorization, 'content-type': 'application/json' },
    requestContext: {
      accountId: '123456789012',
      apiId: 'httpapi01',
      domainName: 'httpapi01.execute-api.eu-west-1.amazonaws.com',
      domainPrefix: 'httpapi01',
      http: { method: 'POST', path: '/v1/payments', protocol: 'HTTP/1.1', sourceIp: '203.0.113.7', userAgent: 'test' },
      requestId: 'req-1',
      routeKey: 'POST /payments',
      stage: 'v1',
      time: '01/Jan/2027:00:00:00 +0000',
      timeEpoch: 1_798_761_600_000,
    },
  };
}

describe('the authorizer behind a REST API (TOKEN)', () => {
  it('allows the whole API for a known key, with its account in the context', async () => {
    const result = await handler(tokenEvent(`Bearer ${key}`), lambdaContext());
    expect(result.principalId).toBe('acct_auth');
    expect(result.context).toEqual({ accountId: 'acct_auth' });
    expect(result.policyDocument.Statement).toEqual([
      {
        Action: 'execute-api:Invoke',
        Effect: 'Allow',
        Resource: 'arn:aws:execute-api:eu-west-1:123456789012:restapi01/v1/*',
      },
    ]);
  });

  it('refuses an unknown key with Unauthorized, which API Gateway answers with 401', async () => {
    await expect(handler(tokenEvent('Bearer sk_test_unknown'), lambdaContext())).rejects.toThrow('Unauthorized');
  });
});

describe('the authorizer behind an HTTP API (REQUEST, payload 2.0, simple responses)', () => {
  it('authorizes a known key with its account in the context, whatever the case of its scheme', async () => {
    expect(await handler(requestEvent(`Bearer ${key}`), lambdaContext())).toEqual({
      isAuthorized: true,
      context: { accountId: 'acct_auth' },
    });
    expect(await handler(requestEvent(`bearer ${key}`), lambdaContext())).toMatchObject({ isAuthorized: true });
  });

  it('answers an unknown or malformed key with isAuthorized false (a 403), not an error (a 500)', async () => {
    for (const authorization of ['Bearer sk_test_unknown', `Basic ${key}`, '']) {
      expect(await handler(requestEvent(authorization), lambdaContext())).toEqual({ isAuthorized: false, context: {} });
    }
  });
});
