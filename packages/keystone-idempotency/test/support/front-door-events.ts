import { randomUUID } from 'node:crypto';
import type { ALBEvent, APIGatewayProxyEvent, APIGatewayProxyEventV2 } from 'aws-lambda';

/**
 * One HTTP request, as a client sends it, and the event each front door makes of it: the shapes AWS documents for a
 * REST API (payload 1.0), an HTTP API (payload 2.0), a function URL and an ALB target (with and without multi-value
 * headers).
 */
export interface RequestSpec {
  readonly method?: string;
  /** The route template a REST or HTTP API matched (`/payments/{id}`); default `/payments`. */
  readonly route?: string;
  /** The path as sent; default the route. */
  readonly path?: string;
  readonly pathParameters?: Record<string, string>;
  /** Header fields as the client sent them: a list is a header sent several times (none: not sent). */
  readonly headers?: Record<string, string | readonly string[]>;
  /** An object is sent as JSON; a string as it is. */
  readonly body?: unknown;
  /** The front door base64-encodes the body, as each does for a content type it takes for binary. */
  readonly base64?: boolean;
}

/** Who the authorizer in front says the caller is. */
export type Caller =
  | { readonly kind: 'lambda'; readonly accountId: string }
  | { readonly kind: 'jwt'; readonly sub: string }
  | { readonly kind: 'iam'; readonly accountId: string; readonly cognitoIdentityId?: string }
  | { readonly kind: 'none' };

export const lambdaCaller = (accountId: string): Caller => ({ kind: 'lambda', accountId });

/** A REST API's Lambda proxy event (payload 1.0): `headers` keeps a repeated header's last value. */
export function restEvent(spec: RequestSpec, caller: Caller = lambdaCaller('acct_1')): APIGatewayProxyEvent {
  const { method, route, path } = target(spec);
  const fields = fieldsOf(spec);
  const body = bodyOf(spec);
  const iam = caller.kind === 'iam' ? caller : undefined;
  return {
    resource: route,
    path,
    httpMethod: method,
    headers: Object.fromEntries(fields.map(([name, values]) => [name, values[values.length - 1]])),
    multiValueHeaders: Object.fromEntries(fields),
    queryStringParameters: null,
    multiValueQueryStringParameters: null,
    pathParameters: spec.pathParameters ?? null,
    stageVariables: null,
    body: body.text ?? null,
    isBase64Encoded: body.base64,
    requestContext: {
      accountId: '123456789012',
      apiId: 'restapi01',
      authorizer:
        caller.kind === 'lambda'
          ? { principalId: caller.accountId, accountId: caller.accountId, integrationLatency: 3 }
          : caller.kind === 'jwt'
            ? { claims: { sub: caller.sub, token_use: 'id' } }
            : null,
      protocol: 'HTTP/1.1',
      httpMethod: method,
      identity: {
        accessKey: iam ? 'ASIAEXAMPLE' : null,
        accountId: iam?.accountId ?? null,
        apiKey: null,
        apiKeyId: null,
        caller: iam ? 'AROAEXAMPLE:session' : null,
        clientCert: null,
        cognitoAuthenticationProvider: null,
        cognitoAuthenticationType: iam?.cognitoIdentityId ? 'authenticated' : null,
        cognitoIdentityId: iam?.cognitoIdentityId ?? null,
        cognitoIdentityPoolId: iam?.cognitoIdentityId ? 'eu-west-1:pool' : null,
        principalOrgId: null,
        sourceIp: '203.0.113.7',
        user: iam ? 'AROAEXAMPLE:session' : null,
        userAgent: 'test',
        userArn: iam ? `arn:aws:sts::${iam.accountId}:assumed-role/caller/session` : null,
      },
      path: `/prod${path}`,
      stage: 'prod',
      requestId: randomUUID(),
      requestTimeEpoch: Date.now(),
      resourceId: 'res01',
      resourcePath: route,
    },
  };
}

/**
 * An HTTP API's event (payload 2.0): header names in lower case, a repeated header comma-joined, the cookies moved
 * out of the headers into `cookies`, the route as `routeKey`.
 */
export function httpApiEvent(spec: RequestSpec, caller: Caller = lambdaCaller('acct_1')): APIGatewayProxyEventV2 {
  const { method, route, path } = target(spec);
  return v2Event(spec, `${method} ${route}`, 'httpapi01.execute-api.eu-west-1.amazonaws.com', v2Authorizer(caller), {
    pathParameters: spec.pathParameters ?? {},
    method,
    path,
  });
}

/** A function URL's event: payload 2.0 on a `lambda-url` domain, route key `$default`, an IAM caller or none. */
export function functionUrlEvent(spec: RequestSpec, caller: Caller = { kind: 'none' }): APIGatewayProxyEventV2 {
  const { method, path } = target(spec);
  if (caller.kind !== 'iam' && caller.kind !== 'none')
    throw new Error('a function URL authorizes with IAM or not at all');
  return v2Event(spec, '$default', 'fnurl01abc.lambda-url.eu-west-1.on.aws', v2Authorizer(caller), { method, path });
}

/**
 * An ALB target's event: header names in lower case; with multi-value headers enabled on the target group every value
 * in `multiValueHeaders` (and no `headers`), otherwise only a repeated header's last value. No authorizer: an ALB
 * passes none on. A missing body is an empty string.
 */
export function albEvent(spec: RequestSpec, options: { multiValue?: boolean } = {}): ALBEvent {
  const { method, path } = target(spec);
  const fields = fieldsOf(spec).map(([name, values]) => [name.toLowerCase(), values] as const);
  const body = bodyOf(spec);
  return {
    requestContext: { elb: { targetGroupArn: TARGET_GROUP } },
    httpMethod: method,
    path,
    ...(options.multiValue
      ? { multiValueQueryStringParameters: {}, multiValueHeaders: Object.fromEntries(fields) }
      : {
          queryStringParameters: {},
          headers: Object.fromEntries(fields.map(([name, values]) => [name, values[values.length - 1]])),
        }),
    body: body.text ?? '',
    isBase64Encoded: body.base64,
  };
}

export const TARGET_GROUP = 'arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/payments/6d0ecf831eec9f09';

function v2Event(
  spec: RequestSpec,
  routeKey: string,
  domainName: string,
  authorizer: Record<string, unknown> | undefined,
  request: { method: string; path: string; pathParameters?: Record<string, string> },
): APIGatewayProxyEventV2 {
  const headers: Record<string, string> = {};
  const cookies: string[] = [];
  for (const [name, values] of fieldsOf(spec)) {
    const lower = name.toLowerCase();
    if (lower === 'cookie') cookies.push(...values.flatMap((value) => value.split(/;\s*/)));
    else headers[lower] = headers[lower] === undefined ? values.join(',') : `${headers[lower]},${values.join(',')}`;
  }
  const body = bodyOf(spec);
  const event = {
    version: '2.0',
    routeKey,
    rawPath: request.path,
    rawQueryString: '',
    ...(cookies.length > 0 ? { cookies } : {}),
    headers,
    requestContext: {
      accountId: '123456789012',
      apiId: domainName.split('.')[0] ?? 'api',
      ...(authorizer ? { authorizer } : {}),
      domainName,
      domainPrefix: domainName.split('.')[0] ?? 'api',
      http: {
        method: request.method,
        path: request.path,
        protocol: 'HTTP/1.1',
        sourceIp: '203.0.113.7',
        userAgent: 'test',
      },
      requestId: randomUUID(),
      routeKey,
      stage: '$default',
      time: '01/Jan/2027:00:00:00 +0000',
      timeEpoch: Date.now(),
    },
    ...(request.pathParameters ? { pathParameters: request.pathParameters } : {}),
    ...(body.text === undefined ? {} : { body: body.text }),
    isBase64Encoded: body.base64,
  };
  return event as APIGatewayProxyEventV2;
}

function v2Authorizer(caller: Caller): Record<string, unknown> | undefined {
  switch (caller.kind) {
    case 'lambda':
      return { lambda: { accountId: caller.accountId } };
    case 'jwt':
      return {
        jwt: { claims: { sub: caller.sub, iss: 'https://issuer.example', scope: 'payments' }, scopes: ['payments'] },
        principalId: '',
        integrationLatency: 0,
      };
    case 'iam':
      return {
        iam: {
          accessKey: 'ASIAEXAMPLE',
          accountId: caller.accountId,
          callerId: 'AROAEXAMPLE:session',
          cognitoIdentity: caller.cognitoIdentityId
            ? { amr: ['authenticated'], identityId: caller.cognitoIdentityId, identityPoolId: 'eu-west-1:pool' }
            : null,
          principalOrgId: null,
          userArn: `arn:aws:sts::${caller.accountId}:assumed-role/caller/session`,
          userId: 'AROAEXAMPLE:session',
        },
      };
    case 'none':
      return undefined;
  }
}

function target(spec: RequestSpec): { method: string; route: string; path: string } {
  const route = spec.route ?? '/payments';
  return { method: spec.method ?? 'POST', route, path: spec.path ?? route };
}

function fieldsOf(spec: RequestSpec): [string, string[]][] {
  const headers = { 'Content-Type': 'application/json', ...spec.headers };
  return Object.entries(headers)
    .map(([name, value]): [string, string[]] => [name, typeof value === 'string' ? [value] : [...value]])
    .filter(([, values]) => values.length > 0);
}

function bodyOf(spec: RequestSpec): { text: string | undefined; base64: boolean } {
  if (spec.body === undefined) return { text: undefined, base64: false };
  const text = typeof spec.body === 'string' ? spec.body : JSON.stringify(spec.body);
  return spec.base64 ? { text: Buffer.from(text, 'utf8').toString('base64'), base64: true } : { text, base64: false };
}
