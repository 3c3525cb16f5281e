import type {
  ALBEvent,
  ALBResult,
  APIGatewayProxyEvent,
  APIGatewayProxyEventV2,
  APIGatewayProxyResult,
  APIGatewayProxyStructuredResultV2,
} from 'aws-lambda';

/**
 * The four ways an HTTP request reaches a Lambda function. Each shapes its event, and the response it expects back,
 * in its own way; the HTTP adapter tells them apart by the event and answers each in its own format.
 *
 * | front door     | event                                                      | headers in the event                                                  |
 * | -------------- | ---------------------------------------------------------- | --------------------------------------------------------------------- |
 * | `rest`         | API Gateway payload 1.0 (a REST API, or an HTTP API on 1.0) | `headers` (last value) and `multiValueHeaders` (every value)          |
 * | `http-api`     | API Gateway HTTP API, payload 2.0 (`version: '2.0'`)         | `headers`, a repeated one comma-joined; cookies apart, in `cookies`   |
 * | `function-url` | a Lambda function URL: payload 2.0, on `*.lambda-url.*`      | as `http-api`                                                         |
 * | `alb`          | an Application Load Balancer target (`requestContext.elb`) | `headers` (last value), or only `multiValueHeaders` when the target group enables them |
 */
export type FrontDoor = 'rest' | 'http-api' | 'function-url' | 'alb';

/**
 * An HTTP event from any front door. The payload 2.0 type covers its authorizer variants (Lambda, JWT, IAM) and a
 * function URL's event, which is the same type.
 */
export type HttpEvent = APIGatewayProxyEvent | APIGatewayProxyEventV2 | ALBEvent;

/** A response in any front door's format (payload 2.0 also takes a bare value, as JSON: see {@link readResponse}). */
export type HttpResult = APIGatewayProxyResult | APIGatewayProxyStructuredResultV2 | ALBResult;

/** The front door an event came through, or undefined for an event that is not an HTTP request. */
export function frontDoorOf(event: unknown): FrontDoor | undefined {
  if (!isRecord(event) || !isRecord(event.requestContext)) return undefined;
  const context = event.requestContext;
  if (isRecord(context.elb)) return 'alb';
  if (event.version === '2.0' && isRecord(context.http)) {
    // Function URLs and HTTP APIs send the same payload; only the domain tells them apart (and nothing depends on it).
    return typeof context.domainName === 'string' && context.domainName.includes('.lambda-url.')
      ? 'function-url'
      : 'http-api';
  }
  return typeof event.httpMethod === 'string' ? 'rest' : undefined;
}

/** True for the payload 2.0 front doors (an HTTP API, a function URL), which share a request and response format. */
export function isPayloadV2(door: FrontDoor | undefined): door is 'http-api' | 'function-url' {
  return door === 'http-api' || door === 'function-url';
}

/**
 * A request header, by case-insensitive name, from any front door. A header sent more than once reads as its values
 * joined with commas, as payload 2.0 hands it over, so one request reads the same through a REST API, an HTTP API, a
 * function URL and an ALB with multi-value headers (payload 1.0's `headers` alone keeps only the last value; an ALB
 * without multi-value headers sends nothing else). `Cookie` is read from a payload 2.0 event's `cookies`, where API
 * Gateway moves it.
 */
export function requestHeader(event: HttpEvent, name: string): string | undefined {
  const wanted = name.toLowerCase();
  if (wanted === 'cookie') {
    const cookies = requestCookies(event);
    return cookies.length === 0 ? undefined : cookies.join('; ');
  }
  const values = headerValues(event, wanted);
  return values.length === 0 ? undefined : values.join(',');
}

/** The request's cookies (`name=value`), from payload 2.0's `cookies` or from the `Cookie` header(s). */
export function requestCookies(event: HttpEvent): string[] {
  if (isPayloadV2(frontDoorOf(event))) {
    const { cookies } = event as APIGatewayProxyEventV2;
    return Array.isArray(cookies) ? cookies.filter((cookie) => typeof cookie === 'string') : [];
  }
  return headerValues(event, 'cookie')
    .flatMap((value) => value.split(';'))
    .map((cookie) => cookie.trim())
    .filter((cookie) => cookie.length > 0);
}

/** The request method, from any front door. */
export function requestMethod(event: HttpEvent): string {
  if (isPayloadV2(frontDoorOf(event))) return (event as APIGatewayProxyEventV2).requestContext.http.method;
  return (event as APIGatewayProxyEvent | ALBEvent).httpMethod;
}

/**
 * The operation a request names, which an idempotency key is scoped to: its method and route template where the
 * front door has one (`POST /payments/{id}`: a REST API's resource, an HTTP API's route key), else its method and
 * path, normalized by `operationPath` (a function URL, an ALB target, an HTTP API's `$default` route), so that
 * `/payments`, `/payments/` and `//payments` are one operation. The same route through a REST API and an HTTP API is
 * the same operation: a key sent to one replays through the other. To name operations otherwise, give
 * `httpIdempotency` an `operation` option.
 */
export function requestOperation(event: HttpEvent): string {
  const door = frontDoorOf(event);
  const method = requestMethod(event);
  if (isPayloadV2(door)) {
    const v2 = event as APIGatewayProxyEventV2;
    // A route key is `METHOD /template` (`ANY /{proxy+}` too, whose method is the request's), or `$default`.
    const template = / (\/.*)$/.exec(v2.routeKey ?? '')?.[1];
    return `${method} ${template ?? operationPath(v2.rawPath)}`;
  }
  if (door === 'alb') return `${method} ${operationPath((event as ALBEvent).path)}`;
  return `${method} ${(event as APIGatewayProxyEvent).resource}`;
}

/** RFC 3986's unreserved characters: percent-encoding one of them changes nothing (§2.3). */
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/**
 * A path as sent, normalized for an operation's name where there is no route template: the spellings a client, a
 * proxy or a hand-typed URL produce for one resource name one operation, so one key with one body runs the handler
 * once, whichever of them each retry used. Following RFC 3986's normalizations (§6.2.2):
 *
 * - percent-encodings of unreserved characters are decoded (`%7E` is `~`, `%2E` is `.`), and the others' hex digits
 *   upper-cased (`%2f` is `%2F`);
 * - repeated slashes collapse and a trailing slash is dropped (`//payments/` is `/payments`; the root stays `/`);
 * - dot segments are removed (`/payments/./` and `/x/../payments` are `/payments`; `..` never climbs above the root).
 *
 * An encoded slash (`%2F`) stays what it is, data inside a segment: `/a%2Fb` and `/a/b` remain two operations. Case is
 * kept (paths are case-sensitive), and the query string is never part of the operation.
 *
 * @example
 * operationPath('//payments/./'); // '/payments'
 * operationPath('/pay%6dents/');  // '/payments'
 */
export function operationPath(path: string): string {
  const decoded = path.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => {
    const char = String.fromCharCode(Number.parseInt(hex, 16));
    return UNRESERVED.test(char) ? char : `%${hex.toUpperCase()}`;
  });
  const segments: string[] = [];
  for (const segment of decoded.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  return `/${segments.join('/')}`;
}

/**
 * Every value of one header (`wanted` in lower case). `multiValueHeaders` holds every value where the event has it
 * (payload 1.0 always, an ALB when enabled); `headers` holds one per name otherwise. Names differing only in case are
 * one header.
 */
function headerValues(event: HttpEvent, wanted: string): string[] {
  const record = event as { headers?: unknown; multiValueHeaders?: unknown };
  const fromMulti = matching(record.multiValueHeaders, wanted).flatMap((value) =>
    Array.isArray(value) ? value.map(String) : [],
  );
  if (fromMulti.length > 0) return fromMulti;
  return matching(record.headers, wanted).flatMap((value) =>
    value === undefined || value === null ? [] : [String(value)],
  );
}

function matching(headers: unknown, wanted: string): unknown[] {
  if (!isRecord(headers)) return [];
  return Object.entries(headers)
    .filter(([name]) => name.toLowerCase() === wanted)
    .map(([, value]) => value);
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
