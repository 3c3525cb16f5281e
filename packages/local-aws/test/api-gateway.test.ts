import type {
  APIGatewayAuthorizerResult,
  APIGatewayProxyEvent,
  APIGatewayProxyResult,
  APIGatewayTokenAuthorizerEvent,
  Context,
} from 'aws-lambda';
import { type ApiGateway, type Route, startApiGateway, type TokenAuthorizer } from '../src/api-gateway';
import { eventually, rawRequest, recordingLog } from './support';

const METHOD_ARN_PREFIX = 'arn:aws:execute-api:local:000000000000:local/local';

interface Seen {
  event: APIGatewayProxyEvent;
  context: Context;
  remainingMs: number;
}

/** A handler that answers with nothing interesting and remembers what it was given. */
function echo(seen: Seen[]): Route['handler'] {
  return async (event, context) => {
    seen.push({ event, context, remainingMs: context.getRemainingTimeInMillis() });
    return { statusCode: 200, body: JSON.stringify({ ok: true }) };
  };
}

function policy(effect: 'Allow' | 'Deny', resource: string | string[]): APIGatewayAuthorizerResult['policyDocument'] {
  return { Version: '2012-10-17', Statement: [{ Action: 'execute-api:Invoke', Effect: effect, Resource: resource }] };
}

/** A TOKEN authorizer whose decision is chosen by the token, and which counts its calls. */
function tokenAuthorizer(calls: APIGatewayTokenAuthorizerEvent[]): TokenAuthorizer {
  return async (event) => {
    calls.push(event);
    const token = event.authorizationToken;
    if (token === 'Bearer bad') throw new Error('Unauthorized');
    if (token === 'Bearer broken') throw new Error('database down');
    if (token === 'Bearer deny') return { principalId: 'u-1', policyDocument: policy('Deny', event.methodArn) };
    if (token === 'Bearer nested') {
      const context = { tenant: { id: 't' } } as unknown as APIGatewayAuthorizerResult['context'];
      return { principalId: 'u-1', policyDocument: policy('Allow', '*'), context };
    }
    if (token === 'Bearer gets-only') {
      return { principalId: 'u-1', policyDocument: policy('Allow', `${METHOD_ARN_PREFIX}/GET/secure/payments/*`) };
    }
    if (token === 'Bearer exact') return { principalId: 'u-1', policyDocument: policy('Allow', event.methodArn) };
    return {
      principalId: 'user-42',
      policyDocument: policy('Allow', `${METHOD_ARN_PREFIX}/*`),
      context: { tenantId: 'tenant-7', scopes: 3, admin: false },
    };
  };
}

describe('startApiGateway', () => {
  const seen: Seen[] = [];
  const authorizerCalls: APIGatewayTokenAuthorizerEvent[] = [];
  const cachedAuthorizerCalls: APIGatewayTokenAuthorizerEvent[] = [];
  const log = recordingLog();
  let slowHandlerFinished = false;
  /** The slow handler runs until the test lets it finish: past its route's 200 ms integration timeout, surely. */
  let finishSlowHandler: () => void = () => undefined;
  const slowHandlerMayFinish = new Promise<void>((resolve) => {
    finishSlowHandler = resolve;
  });
  let api: ApiGateway;

  beforeAll(async () => {
    const handler = echo(seen);
    api = await startApiGateway({
      log,
      functionTimeoutMs: 5_000,
      binaryMediaTypes: ['image/*'],
      maxPayloadBytes: 64 * 1024,
      routes: [
        { method: 'GET', resource: '/', handler },
        { method: 'POST', resource: '/payments/{id}', handler, functionName: 'payments-create', timeoutMs: 10_000 },
        { method: 'GET', resource: '/payments/search', handler },
        { method: 'ANY', resource: '/files/{proxy+}', handler },
        { method: 'GET', resource: '/secure/payments/{id}', handler, authorizer: tokenAuthorizer(authorizerCalls) },
        { method: 'POST', resource: '/secure/payments', handler, authorizer: tokenAuthorizer(authorizerCalls) },
        {
          method: 'GET',
          resource: '/cached/{id}',
          handler,
          authorizer: { handler: tokenAuthorizer(cachedAuthorizerCalls), resultTtlSeconds: 60 },
        },
        {
          method: 'GET',
          resource: '/headers',
          handler: async () => ({
            statusCode: 201,
            headers: { 'X-Single': 'one', 'Content-Type': 'text/plain', 'X-Both': 'from-headers' },
            multiValueHeaders: { 'Set-Cookie': ['a=1', 'b=2'], 'X-Both': ['from-multi'] },
            body: 'created',
          }),
        },
        {
          method: 'GET',
          resource: '/image',
          handler: async () => ({
            statusCode: 200,
            headers: { 'Content-Type': 'image/png' },
            body: Buffer.from([0x89, 0x50, 0x4e, 0x47]).toString('base64'),
            isBase64Encoded: true,
          }),
        },
        {
          method: 'GET',
          resource: '/throws',
          handler: async () => {
            throw new Error('secret connection string in stack');
          },
        },
        {
          method: 'GET',
          resource: '/malformed',
          handler: async () => ({ statusCode: 200, body: { not: 'a string' } }) as unknown as APIGatewayProxyResult,
        },
        {
          method: 'GET',
          resource: '/slow',
          integrationTimeoutMs: 200,
          handler: async () => {
            await slowHandlerMayFinish;
            slowHandlerFinished = true;
            return { statusCode: 200, body: 'late' };
          },
        },
        {
          method: 'GET',
          resource: '/past-function-timeout',
          timeoutMs: 100,
          handler: async () => {
            await new Promise((resolve) => setTimeout(resolve, 300));
            return { statusCode: 200, body: 'too late' };
          },
        },
      ],
    });
  });

  afterAll(async () => {
    await api.close();
  });

  beforeEach(() => {
    seen.length = 0;
    authorizerCalls.length = 0;
    log.errors.length = 0;
  });

  describe('the proxy event', () => {
    it('carries path, path parameters, query and headers as API Gateway sends them', async () => {
      const response = await rawRequest(`${api.url}/payments/pay%20123?a=1&a=2&b=x&empty`, {
        method: 'POST',
        headers: { 'X-Custom-Header': 'kept', 'x-multi': ['first', 'second'], 'Content-Type': 'application/json' },
        body: '{"amount":100}',
      });

      expect(response.status).toBe(200);
      const { event } = seen[0]!;
      expect(event).toMatchObject({
        resource: '/payments/{id}',
        path: '/payments/pay 123',
        httpMethod: 'POST',
        pathParameters: { id: 'pay 123' },
        queryStringParameters: { a: '2', b: 'x', empty: '' },
        multiValueQueryStringParameters: { a: ['1', '2'], b: ['x'], empty: [''] },
        stageVariables: null,
        body: '{"amount":100}',
        isBase64Encoded: false,
      });
      expect(event.headers['X-Custom-Header']).toBe('kept');
      expect(event.headers['x-multi']).toBe('second');
      expect(event.multiValueHeaders['x-multi']).toEqual(['first', 'second']);
      expect(event.headers['X-Forwarded-For']).toBe('127.0.0.1');
      expect(event.headers['X-Amzn-Trace-Id']).toMatch(/^Root=1-[0-9a-f]{8}-[0-9a-f]{24}$/);
      expect(event.requestContext).toMatchObject({
        accountId: '000000000000',
        resourcePath: '/payments/{id}',
        httpMethod: 'POST',
        path: '/local/payments/pay 123',
        stage: 'local',
        identity: { sourceIp: '127.0.0.1' },
      });
      expect(event.requestContext.authorizer).toBeUndefined();
      expect(event.requestContext.requestId).toMatch(/^[0-9a-f-]{36}$/);
      expect(response.headers['x-amzn-requestid']).toBe(event.requestContext.requestId);
      expect(Math.abs(event.requestContext.requestTimeEpoch - Date.now())).toBeLessThan(5_000);
    });

    it('uses null, not empty objects, for a request without query, path parameters or body', async () => {
      await fetch(`${api.url}/`);

      expect(seen[0]!.event).toMatchObject({
        resource: '/',
        path: '/',
        pathParameters: null,
        queryStringParameters: null,
        multiValueQueryStringParameters: null,
        body: null,
        isBase64Encoded: false,
      });
    });

    it('base64-encodes a body that is not UTF-8, or whose type is a binary media type', async () => {
      const bytes = Buffer.from([0xff, 0xfe, 0x00, 0x41]);
      await fetch(`${api.url}/payments/p-1`, { method: 'POST', body: bytes });
      await fetch(`${api.url}/payments/p-2`, {
        method: 'POST',
        body: 'plain text',
        headers: { 'content-type': 'image/svg' },
      });

      expect(seen[0]!.event.isBase64Encoded).toBe(true);
      expect(Buffer.from(seen[0]!.event.body!, 'base64')).toEqual(bytes);
      expect(seen[1]!.event.isBase64Encoded).toBe(true);
      expect(Buffer.from(seen[1]!.event.body!, 'base64').toString()).toBe('plain text');
    });

    it('routes to the most specific resource: static beats {param}, and {proxy+} takes the rest', async () => {
      await fetch(`${api.url}/payments/search`);
      await fetch(`${api.url}/files/a/b%2Fc/d.txt`, { method: 'DELETE' });

      expect(seen[0]!.event.resource).toBe('/payments/search');
      expect(seen[1]!.event).toMatchObject({ resource: '/files/{proxy+}', pathParameters: { proxy: 'a/b/c/d.txt' } });
    });
  });

  describe('the Lambda context', () => {
    it('names the function and counts down from its timeout', async () => {
      await fetch(`${api.url}/payments/p-1`, { method: 'POST' });

      const { context, remainingMs } = seen[0]!;
      expect(context).toMatchObject({
        functionName: 'payments-create',
        functionVersion: '$LATEST',
        invokedFunctionArn: 'arn:aws:lambda:local:000000000000:function:payments-create',
        logGroupName: '/aws/lambda/payments-create',
        callbackWaitsForEmptyEventLoop: true,
      });
      expect(context.awsRequestId).toMatch(/^[0-9a-f-]{36}$/);
      expect(context.awsRequestId).not.toBe(seen[0]!.event.requestContext.requestId);
      // Counted down from the route's 10 s, not from Lambda's 3 s default: a margin no slow machine eats.
      expect(remainingMs).toBeGreaterThan(5_000);
      expect(remainingMs).toBeLessThanOrEqual(10_000);
      expect(remainingMs).toBeLessThanOrEqual(10_000);
      expect(() => context.succeed('x')).toThrow(/deprecated/);
    });
  });

  describe('the response', () => {
    it('writes back headers and multi-value headers, the multi-value list winning for a name in both', async () => {
      const response = await rawRequest(`${api.url}/headers`);

      expect(response.status).toBe(201);
      expect(response.body.toString()).toBe('created');
      expect(response.headers['x-single']).toBe('one');
      expect(response.headers['content-type']).toBe('text/plain');
      expect(response.headers['set-cookie']).toEqual(['a=1', 'b=2']);
      expect(response.headers['x-both']).toBe('from-multi');
      expect(response.rawHeaders).toContain('X-Single');
    });

    it('decodes a base64 body to bytes', async () => {
      const response = await fetch(`${api.url}/image`);

      expect(Buffer.from(await response.arrayBuffer())).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47]));
      expect(response.headers.get('content-type')).toBe('image/png');
    });

    it('labels a response without a content type as JSON, as a REST API does', async () => {
      const response = await fetch(`${api.url}/`);

      expect(response.headers.get('content-type')).toBe('application/json');
    });
  });

  describe('a TOKEN authorizer', () => {
    it('answers 401 to a request without an Authorization header, without invoking the authorizer', async () => {
      const response = await fetch(`${api.url}/secure/payments/p-1`);

      expect(response.status).toBe(401);
      expect(await response.json()).toEqual({ message: 'Unauthorized' });
      expect(response.headers.get('x-amzn-errortype')).toBe('UnauthorizedException');
      expect(authorizerCalls).toHaveLength(0);
      expect(seen).toHaveLength(0);
    });

    it("answers 401 when the authorizer throws Error('Unauthorized')", async () => {
      const response = await fetch(`${api.url}/secure/payments/p-1`, { headers: { Authorization: 'Bearer bad' } });

      expect(response.status).toBe(401);
      expect(await response.json()).toEqual({ message: 'Unauthorized' });
      expect(authorizerCalls).toEqual([
        { type: 'TOKEN', authorizationToken: 'Bearer bad', methodArn: `${METHOD_ARN_PREFIX}/GET/secure/payments/p-1` },
      ]);
    });

    it('answers 403 to a Deny policy', async () => {
      const response = await fetch(`${api.url}/secure/payments/p-1`, { headers: { Authorization: 'Bearer deny' } });

      expect(response.status).toBe(403);
      expect(await response.json()).toEqual({ message: 'User is not authorized to access this resource' });
      expect(seen).toHaveLength(0);
    });

    it('runs the handler on Allow, with principalId and the context (stringified) in requestContext.authorizer', async () => {
      const response = await fetch(`${api.url}/secure/payments`, {
        method: 'POST',
        headers: { Authorization: 'Bearer good' },
      });

      expect(response.status).toBe(200);
      expect(seen[0]!.event.requestContext.authorizer).toEqual({
        principalId: 'user-42',
        tenantId: 'tenant-7',
        scopes: '3',
        admin: 'false',
        integrationLatency: 0,
      });
    });

    it('checks the policy Resource against the method ARN, with * wildcards', async () => {
      const headers = { Authorization: 'Bearer gets-only' };
      const get = await fetch(`${api.url}/secure/payments/p-1`, { headers });
      const post = await fetch(`${api.url}/secure/payments`, { method: 'POST', headers });

      expect(get.status).toBe(200);
      expect(post.status).toBe(403);
    });

    it('answers 500 when the authorizer fails otherwise or returns an object in its context', async () => {
      const broken = await fetch(`${api.url}/secure/payments/p-1`, { headers: { Authorization: 'Bearer broken' } });
      const nested = await fetch(`${api.url}/secure/payments/p-1`, { headers: { Authorization: 'Bearer nested' } });

      expect([broken.status, nested.status]).toEqual([500, 500]);
      expect(await broken.json()).toEqual({ message: null });
      expect(broken.headers.get('x-amzn-errortype')).toBe('AuthorizerConfigurationException');
      expect(seen).toHaveLength(0);
    });

    it('with a cache TTL, reuses a policy for the same token, even on another path (as deployed)', async () => {
      const headers = { Authorization: 'Bearer exact' };
      const first = await fetch(`${api.url}/cached/a`, { headers });
      const again = await fetch(`${api.url}/cached/a`, { headers });
      const otherPath = await fetch(`${api.url}/cached/b`, { headers });

      expect([first.status, again.status, otherPath.status]).toEqual([200, 200, 403]);
      expect(cachedAuthorizerCalls).toHaveLength(1);
    });
  });

  describe('failures', () => {
    it('answers 502 to a handler that throws, logging the error and keeping it out of the body', async () => {
      const response = await fetch(`${api.url}/throws`);
      const body = await response.text();

      expect(response.status).toBe(502);
      expect(JSON.parse(body)).toEqual({ message: 'Internal server error' });
      expect(body).not.toMatch(/secret|stack|Error/);
      expect(log.errors).toHaveLength(1);
      expect(String(log.errors[0]!.details?.error)).toMatch(/secret connection string/);
    });

    it('answers 502 to a malformed proxy result', async () => {
      const response = await fetch(`${api.url}/malformed`);

      expect(response.status).toBe(502);
      expect(log.errors[0]!.message).toMatch(/Malformed Lambda proxy response: body is not a string/);
    });

    it('answers 502 when the function runs past its own timeout', async () => {
      const response = await fetch(`${api.url}/past-function-timeout`);

      expect(response.status).toBe(502);
      expect(log.errors[0]!.message).toMatch(/Task timed out after 100 ms/);
    });

    it('answers 504 at the integration timeout while the handler keeps running', async () => {
      const started = Date.now();
      const response = await fetch(`${api.url}/slow`);

      expect(response.status).toBe(504);
      expect(await response.json()).toEqual({ message: 'Endpoint request timed out' });
      expect(Date.now() - started).toBeGreaterThanOrEqual(200);
      expect(slowHandlerFinished).toBe(false);
      finishSlowHandler();
      await eventually(() => (slowHandlerFinished ? true : undefined));
    });

    it('answers 404 to an unknown path and 405 to a method the resource does not define', async () => {
      const unknown = await fetch(`${api.url}/nowhere`);
      const wrongMethod = await fetch(`${api.url}/payments/p-1`, { method: 'PUT' });

      expect(unknown.status).toBe(404);
      expect(await unknown.json()).toEqual({ message: 'Not Found' });
      expect(wrongMethod.status).toBe(405);
      expect(wrongMethod.headers.get('allow')).toBe('POST');
    });

    it('answers 413 to a body over the payload limit, without invoking the handler', async () => {
      const response = await fetch(`${api.url}/payments/p-1`, { method: 'POST', body: Buffer.alloc(65 * 1024) });

      expect(response.status).toBe(413);
      expect(seen).toHaveLength(0);
    });
  });
});

describe('startApiGateway route table', () => {
  const handler: Route['handler'] = async () => ({ statusCode: 200, body: '' });

  it('rejects a method defined twice on one resource, as a deployment would', async () => {
    await expect(
      startApiGateway({
        routes: [
          { method: 'GET', resource: '/a', handler },
          { method: 'GET', resource: '/a', handler },
        ],
      }),
    ).rejects.toThrow(/route defined twice: GET \/a/);
  });

  it('rejects a greedy variable that is not the last segment', async () => {
    await expect(startApiGateway({ routes: [{ method: 'GET', resource: '/{proxy+}/x', handler }] })).rejects.toThrow(
      /greedy/,
    );
  });
});
