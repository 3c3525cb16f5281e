import type { ServerResponse } from 'node:http';

/**
 * The responses an HTTP API itself produces, with the bodies a deployed one sends. Unlike a REST API's gateway
 * responses, an HTTP API's can't be customised (there is no problem+json to configure), so these are what a client of
 * the deployed HTTP API gets too.
 */
export const HTTP_API_ERRORS = {
  /** No route for the path, or none for the method: an HTTP API has no 405. */
  notFound: { statusCode: 404, message: 'Not Found' },
  /** An identity source of the route's authorizer is missing. */
  unauthorized: { statusCode: 401, message: 'Unauthorized' },
  /** The authorizer answered `isAuthorized: false`. */
  forbidden: { statusCode: 403, message: 'Forbidden' },
  requestTooLarge: { statusCode: 413, message: 'Request Entity Too Large' },
  /** The function (or the authorizer) failed, timed out, was throttled, or answered something the API can't use. */
  internalError: { statusCode: 500, message: 'Internal Server Error' },
  /** The integration timeout passed before the function answered. */
  serviceUnavailable: { statusCode: 503, message: 'Service Unavailable' },
} as const;

export type HttpApiError = (typeof HTTP_API_ERRORS)[keyof typeof HTTP_API_ERRORS];

/** Every HTTP API response carries its request id in this header (a REST API's is `x-amzn-RequestId`). */
const REQUEST_ID_HEADER = 'apigw-requestid';

/** Writes one of the HTTP API's own responses: `{"message": ...}`, never anything from a function. */
export function writeHttpApiError(res: ServerResponse, error: HttpApiError, requestId: string): void {
  const body = JSON.stringify({ message: error.message });
  res.writeHead(error.statusCode, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(body),
    [REQUEST_ID_HEADER]: requestId,
  });
  res.end(body);
}

/** A function's answer as the HTTP API will write it. */
export interface HttpApiResponse {
  readonly statusCode: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly cookies: readonly string[];
  readonly body: string;
  readonly isBase64Encoded: boolean;
}

/**
 * Reads a function's answer the way an HTTP API does with payload format 2.0:
 * - an object with a `statusCode` is a response: `statusCode` an HTTP status, `headers` a map of scalar values,
 *   `cookies` a list of strings, `body` a string, `isBase64Encoded` a boolean (`multiValueHeaders`, a payload 1.0
 *   field, is ignored);
 * - anything else is the body of a 200 `application/json` response: the value as JSON (a function that returns
 *   nothing answers `null`).
 * Returns the reason a response is malformed (a 500) instead of a response.
 */
export function readFunctionResult(result: unknown): HttpApiResponse | { readonly malformed: string } {
  if (!isRecord(result) || !('statusCode' in result)) {
    return {
      statusCode: 200,
      headers: { 'Content-Type': 'application/json' },
      cookies: [],
      body: JSON.stringify(result ?? null),
      isBase64Encoded: false,
    };
  }
  const { statusCode, headers = {}, cookies = [], body = '', isBase64Encoded = false } = result;
  if (typeof statusCode !== 'number' || !Number.isInteger(statusCode) || statusCode < 100 || statusCode > 599) {
    return { malformed: 'statusCode is not an HTTP status' };
  }
  if (!isRecord(headers) || !Object.values(headers).every(isScalar))
    return { malformed: 'headers is not a map of values' };
  if (!Array.isArray(cookies) || !cookies.every((cookie) => typeof cookie === 'string')) {
    return { malformed: 'cookies is not a list of strings' };
  }
  if (body !== null && typeof body !== 'string') return { malformed: 'body is not a string' };
  if (typeof isBase64Encoded !== 'boolean') return { malformed: 'isBase64Encoded is not a boolean' };
  return {
    statusCode,
    headers: Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, String(value)])),
    cookies,
    body: body ?? '',
    isBase64Encoded,
  };
}

/**
 * Writes a function's response: its headers as given, each cookie as a `Set-Cookie` field, a base64 body decoded to
 * bytes. A response without a `Content-Type` is labelled `text/plain; charset=utf-8`, as an HTTP API does (a REST
 * API says `application/json`).
 */
export function writeFunctionResponse(res: ServerResponse, response: HttpApiResponse, requestId: string): void {
  const fields = new Map<string, [string, string]>();
  for (const [name, value] of Object.entries(response.headers)) fields.set(name.toLowerCase(), [name, value]);
  if (!fields.has('content-type')) fields.set('content-type', ['Content-Type', 'text/plain; charset=utf-8']);
  const body = response.isBase64Encoded ? Buffer.from(response.body, 'base64') : Buffer.from(response.body);
  fields.set('content-length', ['Content-Length', String(body.length)]);
  fields.set(REQUEST_ID_HEADER, [REQUEST_ID_HEADER, requestId]);
  const rawHeaders = [...fields.values(), ...response.cookies.map((cookie) => ['Set-Cookie', cookie])];
  res.writeHead(response.statusCode, rawHeaders.flat());
  res.end(body);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isScalar(value: unknown): boolean {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean';
}
