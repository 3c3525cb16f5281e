import { randomUUID } from 'node:crypto';
import type { APIGatewayProxyEvent, Context } from 'aws-lambda';

/** A REST API (v1) proxy event as API Gateway sends it after a Lambda authorizer. */
export function apiEvent(options: {
  method?: string;
  resource?: string;
  path?: string;
  body?: unknown;
  headers?: Record<string, string>;
  accountId?: string | null;
  pathParameters?: Record<string, string> | null;
}): APIGatewayProxyEvent {
  const method = options.method ?? 'POST';
  const resource = options.resource ?? '/payments';
  const body =
    options.body === undefined ? null : typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
  const accountId = options.accountId === undefined ? 'acct_1' : options.accountId;
  return {
    resource,
    path: options.path ?? resource,
    httpMethod: method,
    headers: { 'Content-Type': 'application/json', ...options.headers },
    multiValueHeaders: {},
    queryStringParameters: null,
    multiValueQueryStringParameters: null,
    pathParameters: options.pathParameters ?? null,
    stageVariables: null,
    body,
    isBase64Encoded: false,
    requestContext: {
      accountId: '000000000000',
      apiId: 'local',
      authorizer: accountId === null ? null : { principalId: accountId, accountId },
      protocol: 'HTTP/1.1',
      httpMethod: method,
      identity: { sourceIp: '127.0.0.1' } as APIGatewayProxyEvent['requestContext']['identity'],
      path: resource,
      stage: 'local',
      requestId: randomUUID(),
      requestTimeEpoch: Date.now(),
      resourceId: 'local',
      resourcePath: resource,
    },
  };
}

/** A Lambda context with a real countdown. */
export function lambdaContext(timeoutMs = 10_000): Context {
  const deadline = Date.now() + timeoutMs;
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName: 'test',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:local:000000000000:function:test',
    memoryLimitInMB: '256',
    awsRequestId: randomUUID(),
    logGroupName: '/aws/lambda/test',
    logStreamName: 'test',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}
