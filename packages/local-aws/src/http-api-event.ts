import type {
  APIGatewayEventRequestContextV2,
  APIGatewayProxyEventV2,
  APIGatewayProxyEventV2WithLambdaAuthorizer,
  APIGatewayRequestAuthorizerEventV2,
} from 'aws-lambda';
import { decodeUtf8, formatRequestTime, type GatewayRequest, traceId } from './gateway-request';

/** What an HTTP API route's function receives: payload 2.0, with a Lambda authorizer's context when it has one. */
export type HttpApiEvent =
  | APIGatewayProxyEventV2
  | APIGatewayProxyEventV2WithLambdaAuthorizer<Readonly<Record<string, unknown>>>;

/** Where the request was routed. */
export interface HttpApiRouting {
  readonly requestId: string;
  /** `POST /payments/{id}`: the route's method and path as defined (`ANY` for an `ANY` route). */
  readonly routeKey: string;
  readonly pathParameters: Record<string, string> | null;
  readonly stage: string;
  readonly apiId: string;
  readonly accountId: string;
}

/**
 * The parts of a payload 2.0 event that a route's function and a REQUEST authorizer both receive, as AWS documents
 * them for an HTTP API:
 * - header names in lower case, a header sent several times as one value joined with commas, and the `Cookie`
 *   header moved out into `cookies` (one entry per cookie); the forwarding headers and a trace id added;
 * - `rawPath` and `rawQueryString` as sent, `queryStringParameters` decoded, a repeated one comma-joined;
 * - absent rather than empty: `cookies`, `queryStringParameters`, `pathParameters` and `body` (there is no
 *   `null` in payload 2.0).
 */
function requestParts(request: GatewayRequest, routing: HttpApiRouting) {
  const { headers, cookies } = eventHeaders(request);
  const queryStringParameters = queryParameters(request.rawQuery);
  const requestContext: APIGatewayEventRequestContextV2 = {
    accountId: routing.accountId,
    apiId: routing.apiId,
    domainName: headers.host ?? `127.0.0.1:${request.serverPort}`,
    domainPrefix: routing.apiId,
    http: {
      method: request.method,
      path: request.rawPath,
      protocol: 'HTTP/1.1',
      sourceIp: request.sourceIp,
      userAgent: headers['user-agent'] ?? '',
    },
    requestId: routing.requestId,
    routeKey: routing.routeKey,
    stage: routing.stage,
    time: formatRequestTime(new Date(request.receivedAt)),
    timeEpoch: request.receivedAt,
  };
  return {
    routeKey: routing.routeKey,
    rawPath: request.rawPath,
    rawQueryString: request.rawQuery,
    ...(cookies.length > 0 ? { cookies } : {}),
    headers,
    ...(queryStringParameters ? { queryStringParameters } : {}),
    requestContext,
    ...(routing.pathParameters ? { pathParameters: routing.pathParameters } : {}),
  };
}

/**
 * Builds the event an HTTP API's Lambda proxy integration receives (payload format 2.0). A Lambda authorizer's
 * context reaches it as `requestContext.authorizer.lambda`, as the authorizer returned it (objects and numbers
 * included: payload 2.0 does not turn them into strings).
 */
export function buildHttpApiEvent(
  request: GatewayRequest,
  routing: HttpApiRouting,
  authorizerContext: Readonly<Record<string, unknown>> | undefined,
): HttpApiEvent {
  const parts = requestParts(request, routing);
  const body = eventBody(request.body, parts.headers['content-type']);
  return {
    version: '2.0',
    ...parts,
    requestContext: {
      ...parts.requestContext,
      ...(authorizerContext ? { authorizer: { lambda: authorizerContext } } : {}),
    },
    ...(body.body === undefined ? {} : { body: body.body }),
    isBase64Encoded: body.isBase64Encoded,
  };
}

/**
 * Builds the event a Lambda REQUEST authorizer receives with payload format 2.0: the request's parts (no body), the
 * identity source values and the route's ARN.
 */
export function buildRequestAuthorizerEvent(
  request: GatewayRequest,
  routing: HttpApiRouting,
  identitySource: readonly string[],
  routeArn: string,
): APIGatewayRequestAuthorizerEventV2 {
  const { cookies, ...parts } = requestParts(request, routing);
  return {
    version: '2.0',
    type: 'REQUEST',
    routeArn,
    identitySource: [...identitySource],
    ...parts,
    cookies: cookies ?? [],
  };
}

function eventHeaders(request: GatewayRequest): { headers: Record<string, string>; cookies: string[] } {
  const values = new Map<string, string[]>();
  for (let i = 0; i + 1 < request.rawHeaders.length; i += 2) {
    const name = request.rawHeaders[i]!.toLowerCase();
    values.set(name, [...(values.get(name) ?? []), request.rawHeaders[i + 1]!]);
  }
  const cookies = (values.get('cookie') ?? [])
    .flatMap((value) => value.split(';'))
    .map((cookie) => cookie.trim())
    .filter((cookie) => cookie.length > 0);
  values.delete('cookie');

  const forwardedFor = values.get('x-forwarded-for');
  values.set('x-forwarded-for', [forwardedFor ? `${forwardedFor.join(',')}, ${request.sourceIp}` : request.sourceIp]);
  if (!values.has('x-forwarded-port')) values.set('x-forwarded-port', [String(request.serverPort)]);
  if (!values.has('x-forwarded-proto')) values.set('x-forwarded-proto', ['http']);
  if (!values.has('x-amzn-trace-id')) values.set('x-amzn-trace-id', [traceId(request.receivedAt)]);

  const headers: Record<string, string> = {};
  for (const [name, list] of values) headers[name] = list.join(',');
  return { headers, cookies };
}

function queryParameters(rawQuery: string): Record<string, string> | undefined {
  const params = new URLSearchParams(rawQuery);
  const names = [...new Set(params.keys())];
  if (names.length === 0) return undefined;
  return Object.fromEntries(names.map((name) => [name, params.getAll(name).join(',')]));
}

/**
 * An HTTP API has no binary media types setting: it passes a body as text when its content type is a text type
 * (`text/*`, JSON, XML, JavaScript) and base64-encodes any other, or a body whose bytes are not UTF-8 (deployed,
 * those would be mangled; base64 keeps local runs lossless). No body is absent.
 */
function eventBody(bytes: Buffer, contentType: string | undefined): { body?: string; isBase64Encoded: boolean } {
  if (bytes.length === 0) return { isBase64Encoded: false };
  const text = isTextType(contentType) ? decodeUtf8(bytes) : undefined;
  return text === undefined
    ? { body: bytes.toString('base64'), isBase64Encoded: true }
    : { body: text, isBase64Encoded: false };
}

function isTextType(contentType: string | undefined): boolean {
  const type = contentType?.split(';')[0]?.trim().toLowerCase();
  if (!type) return false;
  if (type.startsWith('text/')) return true;
  const [, subtype = ''] = type.split('/');
  return (
    ['application/json', 'application/xml', 'application/javascript', 'application/ecmascript'].includes(type) ||
    (type.startsWith('application/') && (subtype.endsWith('+json') || subtype.endsWith('+xml')))
  );
}
