import type { ServerResponse } from 'node:http';
import type { APIGatewayProxyResult } from 'aws-lambda';

/**
 * The responses API Gateway itself produces (its "gateway responses"), with the bodies and `x-amzn-ErrorType`
 * values a deployed REST API sends. Clients and tests can match on them exactly.
 */
export const GATEWAY_RESPONSES = {
  notFound: { statusCode: 404, errorType: 'NotFoundException', message: 'Not Found' },
  methodNotAllowed: { statusCode: 405, errorType: 'MethodNotAllowedException', message: 'Method Not Allowed' },
  unauthorized: { statusCode: 401, errorType: 'UnauthorizedException', message: 'Unauthorized' },
  accessDenied: {
    statusCode: 403,
    errorType: 'AccessDeniedException',
    message: 'User is not authorized to access this resource',
  },
  authorizerConfiguration: { statusCode: 500, errorType: 'AuthorizerConfigurationException', message: null },
  requestTooLarge: { statusCode: 413, errorType: 'RequestEntityTooLargeException', message: 'Request Too Long' },
  /** The function failed, timed out, or answered something that is no proxy response. */
  functionError: { statusCode: 502, errorType: 'InternalServerErrorException', message: 'Internal server error' },
  /**
   * INTEGRATION_FAILURE: Lambda refused the invocation (throttled at the function's concurrency limit). A deployed
   * API may map it ({@link MappedGatewayResponse}).
   */
  integrationFailure: { statusCode: 500, errorType: 'InternalServerErrorException', message: 'Internal server error' },
  integrationTimeout: {
    statusCode: 504,
    errorType: 'IntegrationTimeoutException',
    message: 'Endpoint request timed out',
  },
} as const;

export type GatewayResponse = (typeof GATEWAY_RESPONSES)[keyof typeof GATEWAY_RESPONSES];

/**
 * How API Gateway's own errors are written: `aws-default` is a REST API's out-of-the-box `{"message": ...}`;
 * `problem` mirrors the deployed stack's DEFAULT_4XX/5XX gateway responses (lib/infra/api.ts), an RFC 9457 body.
 */
export type GatewayResponseFormat = 'aws-default' | 'problem';

/**
 * The problem+json body a gateway response carries when its template says so (`format: 'problem'`): RFC 9457's
 * `about:blank` titled with API Gateway's own message, and the request id.
 */
export interface GatewayProblem {
  readonly type: 'about:blank';
  readonly title: string | null;
  readonly requestId: string;
}

/** Writes one of API Gateway's own responses: a fixed body, never anything from the handler. */
export function writeGatewayResponse(
  res: ServerResponse,
  response: GatewayResponse,
  requestId: string,
  extraHeaders: Record<string, string> = {},
  format: GatewayResponseFormat = 'aws-default',
): void {
  const problem: GatewayProblem = { type: 'about:blank', title: response.message, requestId };
  const body = format === 'problem' ? JSON.stringify(problem) : JSON.stringify({ message: response.message });
  res.writeHead(response.statusCode, {
    'Content-Type': format === 'problem' ? 'application/problem+json' : 'application/json',
    'Content-Length': Buffer.byteLength(body),
    'x-amzn-RequestId': requestId,
    'x-amzn-ErrorType': response.errorType,
    ...extraHeaders,
  });
  res.end(body);
}

/**
 * A gateway response as a deployed REST API maps it (`AWS::ApiGateway::GatewayResponse`): its status, its headers
 * (values unquoted), and its `application/json` template, in which `$context.requestId` and
 * `$context.error.messageString` are filled in as API Gateway fills them.
 */
export interface MappedGatewayResponse {
  readonly statusCode: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly template: string;
}

/** Writes a mapped gateway response in place of API Gateway's own. */
export function writeMappedGatewayResponse(
  res: ServerResponse,
  mapped: MappedGatewayResponse,
  response: GatewayResponse,
  requestId: string,
): void {
  const body = mapped.template
    .replaceAll('$context.requestId', requestId)
    .replaceAll('$context.error.messageString', JSON.stringify(response.message));
  res.writeHead(mapped.statusCode, {
    'Content-Type': 'application/json',
    ...mapped.headers,
    'Content-Length': Buffer.byteLength(body),
    'x-amzn-RequestId': requestId,
    'x-amzn-ErrorType': response.errorType,
  });
  res.end(body);
}

type HeaderValue = boolean | number | string;

/**
 * Checks a handler's return value the way API Gateway does before it answers: an object with an integer
 * `statusCode`, a string (or absent) `body`, header maps of scalars. Anything else is API Gateway's
 * "Malformed Lambda proxy response", a 502. Returns the reason it is malformed, or undefined when it is fine.
 */
export function malformedReason(result: unknown): string | undefined {
  if (typeof result !== 'object' || result === null || Array.isArray(result)) return 'the result is not an object';
  const { statusCode, body, headers, multiValueHeaders, isBase64Encoded } = result as Record<string, unknown>;
  const status = typeof statusCode === 'string' ? Number(statusCode) : statusCode;
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 100 || status > 599) {
    return 'statusCode is not an HTTP status';
  }
  if (body !== undefined && body !== null && typeof body !== 'string') return 'body is not a string';
  if (isBase64Encoded !== undefined && typeof isBase64Encoded !== 'boolean') return 'isBase64Encoded is not a boolean';
  if (headers !== undefined && headers !== null && !isMapOf(headers, isScalar)) return 'headers is not a map of values';
  if (multiValueHeaders !== undefined && multiValueHeaders !== null && !isMapOf(multiValueHeaders, isScalarList)) {
    return 'multiValueHeaders is not a map of value lists';
  }
  return undefined;
}

function isScalar(value: unknown): value is HeaderValue {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean';
}

function isScalarList(value: unknown): value is HeaderValue[] {
  return Array.isArray(value) && value.every(isScalar);
}

function isMapOf(value: unknown, check: (entry: unknown) => boolean): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.values(value).every(check);
}

/**
 * Writes a handler's proxy result. `headers` and `multiValueHeaders` merge; for a name in both, the multi-value list
 * wins, as API Gateway documents. A base64 body is decoded to bytes. Like a REST API, a response without a
 * `Content-Type` is labelled `application/json`.
 */
export function writeProxyResult(res: ServerResponse, result: APIGatewayProxyResult, requestId: string): void {
  const merged = new Map<string, { name: string; values: string[] }>();
  for (const [name, values] of Object.entries(result.multiValueHeaders ?? {})) {
    merged.set(name.toLowerCase(), { name, values: values.map(String) });
  }
  for (const [name, value] of Object.entries(result.headers ?? {})) {
    if (!merged.has(name.toLowerCase())) merged.set(name.toLowerCase(), { name, values: [String(value)] });
  }
  if (!merged.has('content-type')) merged.set('content-type', { name: 'Content-Type', values: ['application/json'] });
  merged.set('x-amzn-requestid', { name: 'x-amzn-RequestId', values: [requestId] });

  const body = result.isBase64Encoded ? Buffer.from(result.body ?? '', 'base64') : Buffer.from(result.body ?? '');
  merged.set('content-length', { name: 'Content-Length', values: [String(body.length)] });
  // Node's raw header array keeps the handler's casing and repeats a name once per value.
  const rawHeaders = [...merged.values()].flatMap(({ name, values }) => values.map((value) => [name, value]));
  res.writeHead(Number(result.statusCode), rawHeaders.flat());
  res.end(body);
}
