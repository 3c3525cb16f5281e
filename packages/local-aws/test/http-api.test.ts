import type {
  APIGatewayProxyEventV2WithLambdaAuthorizer,
  APIGatewayRequestAuthorizerEventV2,
  Context,
} from 'aws-lambda';
import {
  type HttpApi,
  type HttpApiEvent,
  type HttpApiRoute,
  type RequestAuthorizer,
  startHttpApi,
} from '../src/http-api';
import { eventually, rawRequest, recordingLog } from './support';

interface Seen {
  event: HttpApiEvent;
  context: Context;
  remainingMs: number;
}

type WithAuthorizer = APIGatewayProxyEventV2WithLambdaAuthorizer<Record<string, unknown>>;

/** A function that answers with nothing interesting and remembers what it was given. */
function echo(seen: Seen[]): HttpApiRoute['handler'] {
  return async (event, context) => {
    seen.push({ event, context, remainingMs: context.getRemainingTimeInMillis() });
    return { statusCode: 200, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ok: true }) };
  };
}

/** A REQUEST authorizer (simple responses) whose answer is chosen by the Authorization header, counting its calls. */
function requestAuthorizer(calls: APIGatewayRequestAuthorizerEventV2[]): RequestAuthorizer {
  return async (event) => {
    calls.push(event);
    const [identity] = event.identitySource;
    if (identity === 'Bearer bad') return { isAuthorized: false };
    if (identity === 'Bearer broken') throw new Error('database down');
    if (identity === 'Bearer unauthorized') throw new Error('Unauthorized');
    if (identity === 'Bearer malformed') return { isAuthorized: 'yes' };
    return { isAuthorized: true, context: { accountId: 'acct_7', tier: 3, scopes: ['pay', 'read'] } };
  };
}

describe('startHttpApi', () => {
  const seen: Seen[] = [];
  const authorizerCalls: APIGatewayRequestAuthorizerEventV2[] = [];
  const cachedAuthorizerCalls: APIGatewayRequestAuthorizerEventV2[] = [];
  const queryAuthorizerCalls: APIGatewayRequestAuthorizerEventV2[] = [];
  const log = recordingLog();
  let slowHandlerFinished = false;
  /** The slow handler runs until the test lets it finish: past its route's 200 ms integration timeout, surely. */
  let finishSlowHandler: () => void = () => undefined;
  const slowHandlerMayFinish = new Promise<void>((resolve) => {
    finishSlowHandler = resolve;
  });
  let api: HttpApi;

  beforeAll(async () => {
    const handler = echo(seen);
    const authorizer = { handler: requestAuthorizer(authorizerCalls) };
    const cached = { handler: requestAuthorizer(cachedAuthorizerCalls), resultTtlSeconds: 60 };
    api = await startHttpApi({
      log,
      functionTimeoutMs: 5_000,
      maxPayloadBytes: 64 * 1024,
      routes: [
        { method: 'GET', path: '/', handler },
        { method: 'POST', path: '/payments/{id}', handler, functionName: 'payments-create', timeoutMs: 10_000 },
        { method: 'GET', path: '/payments/search', handler },
        { method: 'ANY', path: '/files/{proxy+}', handler },
        { method: 'GET', path: '/secure/payments/{id}', handler, authorizer },
        { method: 'POST', path: '/secure/payments', handler, authorizer },
        { method: 'GET', path: '/cached/a', handler, authorizer: cached },
        { method: 'GET', path: '/cached/b', handler, authorizer: cached },
        {
          method: 'GET',
          path: '/by-query',
          handler,
          authorizer: {
            handler: requestAuthorizer(queryAuthorizerCalls),
            identitySource: ['$request.querystring.token', '$request.header.X-Tenant'],
          },
        },
        {
          method: 'GET',
          path: '/headers',
          handler: async () => ({
            statusCode: 201,
            headers: { 'X-Single': 'one', 'Content-Type': 'text/html', 'X-Count': 2 },
            cookies: ['a=1; Path=/', 'b=2; Expires=Wed, 21 Oct 2026 07:28:00 GMT'],
            multiValueHeaders: { 'X-Payload-One': ['ignored'] },
            body: 'created',
          }),
        },
        {
          method: 'GET',
          path: '/image',
          handler: async () => ({
            statusCode: 200,
            headers: { 'Content-Type': 'image/png' },
            body: Buffer.from([0x89, 0x50, 0x4e, 0x47]).toString('base64'),
            isBase64Encoded: true,
          }),
        },
        { method: 'GET', path: '/bare', handler: async () => ({ id: 'pay_1', amounts: [1, 2] }) },
        { method: 'GET', path: '/untyped', handler: async () => ({ statusCode: 202, body: 'accepted' }) },
        {
          method: 'GET',
          path: '/throws',
          handler: async () => {
            throw new Error('secret connection string in stack');
          },
        },
        { method: 'GET', path: '/malformed', handler: async () => ({ statusCode: 200, body: { not: 'a string' } }) },
        {
          method: 'GET',
          path: '/slow',
          integrationTimeoutMs: 200,
          handler: async () => {
            await slowHandlerMayFinish;
            slowHandlerFinished = true;
            return { statusCode: 200, body: 'late' };
          },
        },
        {
          method: 'GET',
          path: '/past-function-timeout',
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
    queryAuthorizerCalls.length = 0;
    log.errors.length = 0;
  });

  describe('the payload 2.0 event', () => {
    it('carries the route key, raw path and query, lower-case headers comma-joined, and cookies apart', async () => {
      const response = await rawRequest(`${api.url}/payments/pay%20123?a=1&a=2&b=x&empty`, {
        method: 'POST',
        headers: {
          'X-Custom-Header': 'kept',
          'x-multi': ['first', 'second'],
          Cookie: 'session=abc; theme=dark',
          'Content-Type': 'application/json',
        },
        body: '{"amount":100}',
      });

      expect(response.status).toBe(200);
      const { event } = seen[0]!;
      expect(event).toMatchObject({
        version: '2.0',
        routeKey: 'POST /payments/{id}',
        rawPath: '/payments/pay%20123',
        rawQueryString: 'a=1&a=2&b=x&empty',
        cookies: ['session=abc', 'theme=dark'],
        queryStringParameters: { a: '1,2', b: 'x', empty: '' },
        pathParameters: { id: 'pay 123' },
        body: '{"amount":100}',
        isBase64Encoded: false,
      });
      expect(event.headers).toMatchObject({
        'x-custom-header': 'kept',
        'x-multi': 'first,second',
        'content-type': 'application/json',
        'x-forwarded-for': '127.0.0.1',
        'x-forwarded-proto': 'http',
      });
      expect(event.headers['x-amzn-trace-id']).toMatch(/^Root=1-[0-9a-f]{8}-[0-9a-f]{24}$/);
      expect(Object.keys(event.headers).every((name) => name === name.toLowerCase())).toBe(true);
      expect(event.headers.cookie).toBeUndefined();
      expect(event.requestContext).toMatchObject({
        accountId: '000000000000',
        routeKey: 'POST /payments/{id}',
        stage: '$default',
        http: { method: 'POST', path: '/payments/pay%20123', protocol: 'HTTP/1.1', sourceIp: '127.0.0.1' },
      });
      expect((event as WithAuthorizer).requestContext.authorizer).toBeUndefined();
      expect(event.requestContext.time).toMatch(/^\d{2}\/[A-Z][a-z]{2}\/\d{4}:\d{2}:\d{2}:\d{2} \+0000$/);
      expect(response.headers['apigw-requestid']).toBe(event.requestContext.requestId);
      expect(Math.abs(event.requestContext.timeEpoch - Date.now())).toBeLessThan(5_000);
    });

    it('leaves out what the request has not: query, path parameters, cookies and body (never null)', async () => {
      await fetch(`${api.url}/`);

      const { event } = seen[0]!;
      expect(event).toMatchObject({ routeKey: 'GET /', rawPath: '/', rawQueryString: '', isBase64Encoded: false });
      for (const absent of ['queryStringParameters', 'pathParameters', 'cookies', 'body', 'stageVariables']) {
        expect(event).not.toHaveProperty(absent);
      }
    });

    it('passes a text body as text, and base64-encodes one of another type or not UTF-8', async () => {
      const bytes = Buffer.from([0xff, 0xfe, 0x00, 0x41]);
      await fetch(`${api.url}/payments/p-1`, {
        method: 'POST',
        body: bytes,
        headers: { 'content-type': 'application/json' },
      });
      await fetch(`${api.url}/payments/p-2`, {
        method: 'POST',
        body: 'plain bytes',
        headers: { 'content-type': 'application/octet-stream' },
      });
      await fetch(`${api.url}/payments/p-3`, {
        method: 'POST',
        body: '{"café":1}',
        headers: { 'content-type': 'application/problem+json; charset=utf-8' },
      });

      expect(seen.map(({ event }) => event.isBase64Encoded)).toEqual([true, true, false]);
      expect(Buffer.from(seen[0]!.event.body!, 'base64')).toEqual(bytes);
      expect(Buffer.from(seen[1]!.event.body!, 'base64').toString()).toBe('plain bytes');
      expect(seen[2]!.event.body).toBe('{"café":1}');
    });

    it('routes to the most specific path: static beats {param}, and {proxy+} takes the rest', async () => {
      await fetch(`${api.url}/payments/search`);
      await fetch(`${api.url}/files/a/b%2Fc/d.txt`, { method: 'DELETE' });

      expect(seen[0]!.event.routeKey).toBe('GET /payments/search');
      expect(seen[1]!.event).toMatchObject({
        routeKey: 'ANY /files/{proxy+}',
        pathParameters: { proxy: 'a/b/c/d.txt' },
      });
      expect(seen[1]!.event.requestContext.http.method).toBe('DELETE');
    });
  });

  describe('the Lambda context', () => {
    it('names the function and counts down from its timeout', async () => {
      await fetch(`${api.url}/payments/p-1`, { method: 'POST' });

      const { context, remainingMs } = seen[0]!;
      expect(context).toMatchObject({
        functionName: 'payments-create',
        invokedFunctionArn: 'arn:aws:lambda:local:000000000000:function:payments-create',
      });
      // Counted down from the route's 10 s, not from the API's 5 s default.
      expect(remainingMs).toBeGreaterThan(5_000);
      expect(remainingMs).toBeLessThanOrEqual(10_000);
    });
  });

  describe('the response', () => {
    it('writes headers as given and each cookie as its own Set-Cookie, ignoring payload 1.0 fields', async () => {
      const response = await rawRequest(`${api.url}/headers`);

      expect(response.status).toBe(201);
      expect(response.body.toString()).toBe('created');
      expect(response.headers['x-single']).toBe('one');
      expect(response.headers['x-count']).toBe('2');
      expect(response.headers['content-type']).toBe('text/html');
      expect(response.headers['set-cookie']).toEqual(['a=1; Path=/', 'b=2; Expires=Wed, 21 Oct 2026 07:28:00 GMT']);
      expect(response.headers['x-payload-one']).toBeUndefined();
      expect(response.rawHeaders).toContain('X-Single');
    });

    it('decodes a base64 body to bytes', async () => {
      const response = await fetch(`${api.url}/image`);

      expect(Buffer.from(await response.arrayBuffer())).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47]));
      expect(response.headers.get('content-type')).toBe('image/png');
    });

    it('answers a value without a statusCode as a 200 whose JSON body is the value', async () => {
      const response = await fetch(`${api.url}/bare`);

      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(await response.text()).toBe('{"id":"pay_1","amounts":[1,2]}');
    });

    it('labels a response without a content type as text/plain, as an HTTP API does', async () => {
      const response = await fetch(`${api.url}/untyped`);

      expect(response.status).toBe(202);
      expect(response.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(await response.text()).toBe('accepted');
    });
  });

  describe('a REQUEST authorizer with simple responses', () => {
    it('answers 401 to a request without the identity source, without invoking the authorizer', async () => {
      const response = await fetch(`${api.url}/secure/payments/p-1`);

      expect(response.status).toBe(401);
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(await response.json()).toEqual({ message: 'Unauthorized' });
      expect(authorizerCalls).toHaveLength(0);
      expect(seen).toHaveLength(0);
    });

    it('answers 403 when the authorizer says isAuthorized: false', async () => {
      const response = await fetch(`${api.url}/secure/payments/p-1`, { headers: { Authorization: 'Bearer bad' } });

      expect(response.status).toBe(403);
      expect(await response.json()).toEqual({ message: 'Forbidden' });
      expect(authorizerCalls).toHaveLength(1);
      expect(seen).toHaveLength(0);
    });

    it('invokes it with the payload 2.0 REQUEST event: identity source, route ARN, the request without its body', async () => {
      await fetch(`${api.url}/secure/payments?trace=1`, {
        method: 'POST',
        headers: { Authorization: 'Bearer good', 'Content-Type': 'application/json' },
        body: '{"amount":1}',
      });

      const [event] = authorizerCalls;
      expect(event).toMatchObject({
        version: '2.0',
        type: 'REQUEST',
        routeArn: 'arn:aws:execute-api:local:000000000000:local/$default/POST/secure/payments',
        identitySource: ['Bearer good'],
        routeKey: 'POST /secure/payments',
        rawPath: '/secure/payments',
        rawQueryString: 'trace=1',
        cookies: [],
        queryStringParameters: { trace: '1' },
        requestContext: { routeKey: 'POST /secure/payments', stage: '$default', http: { method: 'POST' } },
      });
      expect(event!.headers?.authorization).toBe('Bearer good');
      expect(event).not.toHaveProperty('body');
    });

    it('runs the function on isAuthorized: true, with the context as returned in requestContext.authorizer.lambda', async () => {
      const response = await fetch(`${api.url}/secure/payments`, {
        method: 'POST',
        headers: { Authorization: 'Bearer good' },
      });

      expect(response.status).toBe(200);
      expect((seen[0]!.event as WithAuthorizer).requestContext.authorizer).toEqual({
        lambda: { accountId: 'acct_7', tier: 3, scopes: ['pay', 'read'] },
      });
    });

    it('answers 500 when the authorizer throws (even Unauthorized) or answers something else', async () => {
      const statuses: number[] = [];
      for (const token of ['broken', 'unauthorized', 'malformed']) {
        const response = await fetch(`${api.url}/secure/payments/p-1`, {
          headers: { Authorization: `Bearer ${token}` },
        });
        statuses.push(response.status);
        expect(await response.json()).toEqual({ message: 'Internal Server Error' });
      }

      expect(statuses).toEqual([500, 500, 500]);
      expect(seen).toHaveLength(0);
      expect(log.errors.map((error) => error.message)).toEqual([
        'authorizer failed',
        'authorizer failed',
        'authorizer returned a malformed simple response',
      ]);
    });

    it('with a cache TTL, reuses an answer (allow or deny) for the same identity on every route behind it', async () => {
      const statuses: number[] = [];
      for (const authorization of ['Bearer good', 'Bearer bad']) {
        for (const path of ['/cached/a', '/cached/b', '/cached/a']) {
          statuses.push((await fetch(`${api.url}${path}`, { headers: { Authorization: authorization } })).status);
        }
      }

      expect(statuses).toEqual([200, 200, 200, 403, 403, 403]);
      expect(cachedAuthorizerCalls.map((call) => call.identitySource)).toEqual([['Bearer good'], ['Bearer bad']]);
    });

    it('reads a query string identity source by its exact name, and needs every identity source', async () => {
      const withBoth = await fetch(`${api.url}/by-query?token=t1`, { headers: { 'X-Tenant': 'acme' } });
      const headerOnly = await fetch(`${api.url}/by-query?Token=t1`, { headers: { 'X-Tenant': 'acme' } });
      const queryOnly = await fetch(`${api.url}/by-query?token=t1`);

      expect([withBoth.status, headerOnly.status, queryOnly.status]).toEqual([200, 401, 401]);
      expect(queryAuthorizerCalls.map((call) => call.identitySource)).toEqual([['t1', 'acme']]);
    });
  });

  describe('failures', () => {
    it('answers 500 to a function that throws, logging the error and keeping it out of the body', async () => {
      const response = await fetch(`${api.url}/throws`);
      const body = await response.text();

      expect(response.status).toBe(500);
      expect(JSON.parse(body)).toEqual({ message: 'Internal Server Error' });
      expect(body).not.toMatch(/secret|stack|Error:/);
      expect(response.headers.get('apigw-requestid')).toMatch(/^[A-Za-z0-9+/]{15}=$/);
      expect(log.errors).toHaveLength(1);
      expect(String(log.errors[0]!.details?.error)).toMatch(/secret connection string/);
    });

    it('answers 500 to a malformed response', async () => {
      const response = await fetch(`${api.url}/malformed`);

      expect(response.status).toBe(500);
      expect(log.errors[0]!.message).toMatch(/Malformed Lambda response \(payload 2\.0\): body is not a string/);
    });

    it('answers 500 when the function runs past its own timeout', async () => {
      const response = await fetch(`${api.url}/past-function-timeout`);

      expect(response.status).toBe(500);
      expect(log.errors[0]!.message).toMatch(/Task timed out after 100 ms/);
    });

    it('answers 503 at the integration timeout while the handler keeps running', async () => {
      const started = Date.now();
      const response = await fetch(`${api.url}/slow`);

      expect(response.status).toBe(503);
      expect(await response.json()).toEqual({ message: 'Service Unavailable' });
      expect(Date.now() - started).toBeGreaterThanOrEqual(200);
      expect(slowHandlerFinished).toBe(false);
      finishSlowHandler();
      await eventually(() => (slowHandlerFinished ? true : undefined));
    });

    it('answers 404 to an unknown path and to a method the route does not have (an HTTP API has no 405)', async () => {
      const unknown = await fetch(`${api.url}/nowhere`);
      const wrongMethod = await fetch(`${api.url}/payments/p-1`, { method: 'PUT' });

      expect([unknown.status, wrongMethod.status]).toEqual([404, 404]);
      expect(await unknown.json()).toEqual({ message: 'Not Found' });
      expect(await wrongMethod.json()).toEqual({ message: 'Not Found' });
      expect(wrongMethod.headers.get('allow')).toBeNull();
    });

    it('answers 413 to a body over the payload limit, without invoking the function', async () => {
      const response = await fetch(`${api.url}/payments/p-1`, { method: 'POST', body: Buffer.alloc(65 * 1024) });

      expect(response.status).toBe(413);
      expect(await response.json()).toEqual({ message: 'Request Entity Too Large' });
      expect(seen).toHaveLength(0);
    });
  });
});

describe('startHttpApi route table', () => {
  const handler: HttpApiRoute['handler'] = async () => ({ statusCode: 200 });

  it('rejects a route defined twice, as a deployment would', async () => {
    await expect(
      startHttpApi({
        routes: [
          { method: 'GET', path: '/a', handler },
          { method: 'GET', path: '/a', handler },
        ],
      }),
    ).rejects.toThrow(/route defined twice: GET \/a/);
  });

  it('rejects a greedy variable that is not the last segment', async () => {
    await expect(startHttpApi({ routes: [{ method: 'GET', path: '/{proxy+}/x', handler }] })).rejects.toThrow(/greedy/);
  });
});
