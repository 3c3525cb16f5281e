import { STATUS_CODES } from 'node:http';
import type { StoredResponse } from '../engine/record.js';
import { type FrontDoor, frontDoorOf, type HttpEvent, type HttpResult, isPayloadV2, isRecord } from './front-door.js';

/** One header field as sent: a name may come back in several (`Set-Cookie`). */
export type HeaderField = readonly [name: string, value: string];

/**
 * A response in no front door's format: what the adapter reads a handler's answer as, stores and replays, and writes
 * back in the format of the front door the request came through ({@link writeResponse}).
 */
export interface HttpResponse {
  readonly statusCode: number;
  /** Every header field, in order, cookies included (`Set-Cookie`, one field per cookie). */
  readonly headers: readonly HeaderField[];
  readonly body: string;
  readonly isBase64Encoded: boolean;
}

const SET_COOKIE = 'set-cookie';

/**
 * Reads a result in any front door's format, so a handler may answer in whichever it likes:
 * - `headers` and `multiValueHeaders` (payload 1.0, ALB) merge; for a name in both, the multi-value list wins, as API
 *   Gateway merges them;
 * - `cookies` (payload 2.0) become `Set-Cookie` fields;
 * - on a payload 2.0 front door, a result without a `statusCode` is what API Gateway and function URLs make of it: a
 *   200 whose `application/json` body is the value.
 *
 * Undefined for something that is no response at all (nothing, or a value without a status on another front door).
 */
export function readResponse(result: unknown, door?: FrontDoor): HttpResponse | undefined {
  if (isRecord(result) && typeof result.statusCode === 'number') {
    const multi = isRecord(result.multiValueHeaders) ? result.multiValueHeaders : {};
    const inMulti = new Set(Object.keys(multi).map((name) => name.toLowerCase()));
    const headers: HeaderField[] = [];
    if (isRecord(result.headers)) {
      for (const [name, value] of Object.entries(result.headers)) {
        if (!inMulti.has(name.toLowerCase()) && isScalar(value)) headers.push([name, String(value)]);
      }
    }
    for (const [name, values] of Object.entries(multi)) {
      if (Array.isArray(values)) for (const value of values.filter(isScalar)) headers.push([name, String(value)]);
    }
    if (Array.isArray(result.cookies)) {
      for (const cookie of result.cookies) if (typeof cookie === 'string') headers.push(['Set-Cookie', cookie]);
    }
    return {
      statusCode: result.statusCode,
      headers,
      body: typeof result.body === 'string' ? result.body : '',
      isBase64Encoded: result.isBase64Encoded === true,
    };
  }
  if (isPayloadV2(door) && result !== undefined && result !== null) {
    return {
      statusCode: 200,
      headers: [['Content-Type', 'application/json']],
      body: JSON.stringify(result),
      isBase64Encoded: false,
    };
  }
  return undefined;
}

/**
 * Writes a response in the format of the front door `event` came through:
 * - `rest` (payload 1.0): `headers`, with a header given several values in `multiValueHeaders` instead;
 * - `http-api`, `function-url` (payload 2.0): `headers`, several values comma-joined, and the cookies in `cookies`
 *   (payload 2.0 has no multi-value headers; API Gateway and function URLs turn `cookies` into `Set-Cookie` fields);
 * - `alb`: with the `statusDescription` an ALB requires (`201 Created`), `isBase64Encoded` always, and the headers in
 *   the form the request came in: `multiValueHeaders` when the target group enables them (the ALB then reads nothing
 *   else), `headers` otherwise (several values comma-joined; of several cookies only the last, as an ALB without
 *   multi-value headers can't send more).
 */
export function writeResponse(response: HttpResponse, event: HttpEvent): HttpResult {
  const door = frontDoorOf(event) ?? 'rest';
  const fields = grouped(response.headers);
  const base64 = response.isBase64Encoded ? { isBase64Encoded: true } : {};
  if (door === 'alb') {
    const multi = isRecord((event as { multiValueHeaders?: unknown }).multiValueHeaders);
    return {
      statusCode: response.statusCode,
      statusDescription: `${response.statusCode} ${STATUS_CODES[response.statusCode] ?? 'Unknown'}`,
      ...(multi
        ? { multiValueHeaders: Object.fromEntries(fields.map(({ name, values }) => [name, values])) }
        : { headers: Object.fromEntries(fields.map(({ name, values }) => [name, singleValue(name, values)])) }),
      body: response.body,
      isBase64Encoded: response.isBase64Encoded,
    };
  }
  if (isPayloadV2(door)) {
    const cookies = fields.filter(({ name }) => name.toLowerCase() === SET_COOKIE).flatMap(({ values }) => values);
    const headers = fields.filter(({ name }) => name.toLowerCase() !== SET_COOKIE);
    return {
      statusCode: response.statusCode,
      headers: Object.fromEntries(headers.map(({ name, values }) => [name, values.join(', ')])),
      ...(cookies.length > 0 ? { cookies } : {}),
      body: response.body,
      ...base64,
    };
  }
  const several = fields.filter(({ values }) => values.length > 1);
  return {
    statusCode: response.statusCode,
    headers: Object.fromEntries(
      fields.filter(({ values }) => values.length === 1).map(({ name, values }) => [name, values.join()]),
    ),
    ...(several.length > 0
      ? { multiValueHeaders: Object.fromEntries(several.map(({ name, values }) => [name, values])) }
      : {}),
    body: response.body,
    ...base64,
  };
}

/**
 * A result, in whatever format a handler or a middleware gave it, written in the format of the front door `event`
 * came through. Left as it is when the event is no HTTP request or the result no response.
 */
export function respondAs(event: unknown, result: unknown): unknown {
  const door = frontDoorOf(event);
  if (door === undefined) return result;
  const response = readResponse(result, door);
  return response === undefined ? result : writeResponse(response, event as HttpEvent);
}

/**
 * The stored form of a response: the status, the body, and only the headers named in `keep` (lower case). A header
 * with several values is kept as one, comma-joined (RFC 9110 §5.3), except `Set-Cookie`, whose values may hold commas
 * themselves: its values are kept one per line, which no header value can contain.
 */
export function toStored(response: HttpResponse, keep: ReadonlySet<string>): StoredResponse {
  const headers: Record<string, string> = {};
  for (const { name, values } of grouped(response.headers)) {
    if (keep.has(name.toLowerCase())) headers[name] = values.join(name.toLowerCase() === SET_COOKIE ? '\n' : ', ');
  }
  return {
    statusCode: response.statusCode,
    body: response.body,
    headers,
    ...(response.isBase64Encoded ? { isBase64Encoded: true } : {}),
  };
}

/** A stored response as a response again, with any extra headers (`Idempotent-Replayed`). */
export function fromStored(stored: StoredResponse, extra: Readonly<Record<string, string>> = {}): HttpResponse {
  const headers: HeaderField[] = [];
  for (const [name, value] of Object.entries({ ...stored.headers, ...extra })) {
    const values = name.toLowerCase() === SET_COOKIE ? value.split('\n') : [value];
    for (const one of values) headers.push([name, one]);
  }
  return {
    statusCode: stored.statusCode,
    headers,
    body: stored.body,
    isBase64Encoded: stored.isBase64Encoded === true,
  };
}

/** Header fields by case-insensitive name, in first-seen order, each under the spelling it first came in. */
function grouped(fields: readonly HeaderField[]): { name: string; values: string[] }[] {
  const byName = new Map<string, { name: string; values: string[] }>();
  for (const [name, value] of fields) {
    const group = byName.get(name.toLowerCase());
    if (group) group.values.push(value);
    else byName.set(name.toLowerCase(), { name, values: [value] });
  }
  return [...byName.values()];
}

function singleValue(name: string, values: readonly string[]): string {
  return name.toLowerCase() === SET_COOKIE ? (values[values.length - 1] ?? '') : values.join(', ');
}

function isScalar(value: unknown): value is string | number | boolean {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean';
}
