import { randomBytes } from 'node:crypto';
import type { APIGatewayProxyEvent } from 'aws-lambda';
import { decodePath, decodeUtf8, formatRequestTime, type GatewayRequest, header, traceId } from './gateway-request';

export type { GatewayRequest } from './gateway-request';

/** Where the request was routed and who the gateway says is calling. */
export interface GatewayRouting {
  readonly requestId: string;
  readonly resource: string;
  readonly pathParameters: Record<string, string> | null;
  readonly authorizer: Record<string, string | number> | null;
  readonly stage: string;
  readonly apiId: string;
  readonly accountId: string;
  /** Content types delivered base64-encoded (API Gateway's `binaryMediaTypes`, e.g. `image/*`). */
  readonly binaryMediaTypes: readonly string[];
}

/**
 * Builds the event a REST API (v1) Lambda proxy integration receives.
 *
 * Faithful where handlers can notice: header names keep the casing the client sent, `headers` holds the last value
 * of a repeated header and `multiValueHeaders` all of them (the same for the query string), absent parts are `null`
 * rather than `{}`, and `requestContext.path` carries the stage prefix while `path` does not.
 */
export function buildProxyEvent(request: GatewayRequest, routing: GatewayRouting): APIGatewayProxyEvent {
  const { headers, multiValueHeaders } = eventHeaders(request);
  const { single: queryStringParameters, multi: multiValueQueryStringParameters } = queryParameters(request.rawQuery);
  const { body, isBase64Encoded } = eventBody(request.body, header(headers, 'content-type'), routing);
  // A REST proxy event's `path` is decoded; a malformed escape is left as sent.
  const path = decodePath(request.rawPath);
  return {
    resource: routing.resource,
    path,
    httpMethod: request.method,
    headers,
    multiValueHeaders,
    queryStringParameters,
    multiValueQueryStringParameters,
    pathParameters: routing.pathParameters,
    stageVariables: null,
    body,
    isBase64Encoded,
    requestContext: {
      accountId: routing.accountId,
      apiId: routing.apiId,
      // Absent (undefined, dropped by JSON) without an authorizer, as on API Gateway.
      authorizer: routing.authorizer ?? undefined,
      domainName: header(headers, 'host') ?? `127.0.0.1:${request.serverPort}`,
      domainPrefix: routing.apiId,
      extendedRequestId: randomBytes(8).toString('base64url'),
      httpMethod: request.method,
      identity: identity(request.sourceIp, header(headers, 'user-agent') ?? null),
      path: `/${routing.stage}${path}`,
      protocol: 'HTTP/1.1',
      requestId: routing.requestId,
      requestTime: formatRequestTime(new Date(request.receivedAt)),
      requestTimeEpoch: request.receivedAt,
      resourceId: randomBytes(3).toString('hex'),
      resourcePath: routing.resource,
      stage: routing.stage,
    },
  };
}

/**
 * API Gateway adds the forwarding headers a load balancer would (`X-Forwarded-For` gets the caller appended) and a
 * trace header when the client sent none; handlers and loggers read these, so they are present locally too.
 */
function eventHeaders(request: GatewayRequest): {
  headers: Record<string, string>;
  multiValueHeaders: Record<string, string[]>;
} {
  const multi = new Map<string, { name: string; values: string[] }>();
  const add = (name: string, value: string) => {
    const entry = multi.get(name.toLowerCase());
    if (entry) entry.values.push(value);
    else multi.set(name.toLowerCase(), { name, values: [value] });
  };
  for (let i = 0; i + 1 < request.rawHeaders.length; i += 2) add(request.rawHeaders[i]!, request.rawHeaders[i + 1]!);

  const forwardedFor = multi.get('x-forwarded-for');
  if (forwardedFor) forwardedFor.values = [`${forwardedFor.values.join(', ')}, ${request.sourceIp}`];
  else add('X-Forwarded-For', request.sourceIp);
  if (!multi.has('x-forwarded-port')) add('X-Forwarded-Port', String(request.serverPort));
  if (!multi.has('x-forwarded-proto')) add('X-Forwarded-Proto', 'http');
  if (!multi.has('x-amzn-trace-id')) add('X-Amzn-Trace-Id', traceId(request.receivedAt));

  const headers: Record<string, string> = {};
  const multiValueHeaders: Record<string, string[]> = {};
  for (const { name, values } of multi.values()) {
    headers[name] = values.at(-1) as string;
    multiValueHeaders[name] = values;
  }
  return { headers, multiValueHeaders };
}

/** `null` when there is no query string at all, as on API Gateway (never an empty object). */
function queryParameters(rawQuery: string): {
  single: Record<string, string> | null;
  multi: Record<string, string[]> | null;
} {
  const params = new URLSearchParams(rawQuery);
  const multi: Record<string, string[]> = {};
  for (const name of new Set(params.keys())) multi[name] = params.getAll(name);
  if (Object.keys(multi).length === 0) return { single: null, multi: null };
  const single = Object.fromEntries(Object.entries(multi).map(([name, values]) => [name, values.at(-1) as string]));
  return { single, multi };
}

/**
 * A body is passed as text unless its content type is a binary media type or its bytes are not valid UTF-8; then it
 * is base64 with `isBase64Encoded: true`. (Deployed, a non-UTF-8 body of a non-binary type would be mangled to
 * replacement characters; base64 keeps local runs lossless and makes the gap visible.) No body is `null`.
 */
function eventBody(
  bytes: Buffer,
  contentType: string | undefined,
  routing: GatewayRouting,
): { body: string | null; isBase64Encoded: boolean } {
  if (bytes.length === 0) return { body: null, isBase64Encoded: false };
  if (isBinaryMediaType(contentType, routing.binaryMediaTypes)) {
    return { body: bytes.toString('base64'), isBase64Encoded: true };
  }
  const text = decodeUtf8(bytes);
  return text === undefined
    ? { body: bytes.toString('base64'), isBase64Encoded: true }
    : { body: text, isBase64Encoded: false };
}

function isBinaryMediaType(contentType: string | undefined, binaryMediaTypes: readonly string[]): boolean {
  const type = contentType?.split(';')[0]?.trim().toLowerCase();
  if (!type) return false;
  return binaryMediaTypes.some((pattern) => {
    const [patternType, patternSubtype] = pattern.toLowerCase().split('/');
    const [actualType, actualSubtype] = type.split('/');
    return (
      (patternType === '*' || patternType === actualType) &&
      (patternSubtype === '*' || patternSubtype === actualSubtype)
    );
  });
}

function identity(sourceIp: string, userAgent: string | null): APIGatewayProxyEvent['requestContext']['identity'] {
  return {
    accessKey: null,
    accountId: null,
    apiKey: null,
    apiKeyId: null,
    caller: null,
    clientCert: null,
    cognitoAuthenticationProvider: null,
    cognitoAuthenticationType: null,
    cognitoIdentityId: null,
    cognitoIdentityPoolId: null,
    principalOrgId: null,
    sourceIp,
    user: null,
    userAgent,
    userArn: null,
  };
}
