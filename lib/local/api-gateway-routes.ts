import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import type { TokenAuthorizer, TokenAuthorizerConfig } from './api-gateway-authorizer';
import type { LambdaHandler } from './lambda-invoke';

/** The methods a REST API resource can define; `ANY` catches every method not defined on its own. */
export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD' | 'OPTIONS' | 'ANY';

/** A Lambda proxy-integration handler: the same function the deployed stack runs. */
export type ProxyHandler = LambdaHandler<APIGatewayProxyEvent, APIGatewayProxyResult>;

/** One method on one resource, integrated with one Lambda function. */
export interface Route {
  method: HttpMethod;
  /** A REST API resource path: `/payments`, `/payments/{id}`, `/files/{proxy+}` (greedy, last segment only). */
  resource: string;
  handler: ProxyHandler;
  /** A TOKEN authorizer on the `Authorization` header; a bare function or a config with a cache TTL. */
  authorizer?: TokenAuthorizer | TokenAuthorizerConfig;
  /** The function's name in the context and in logs. Default: derived from method and resource. */
  functionName?: string;
  /** The Lambda function's timeout (like `timeout` on the CDK function). Default: the gateway's `functionTimeoutMs`. */
  timeoutMs?: number;
  /** This method's integration timeout. Default: the gateway's `integrationTimeoutMs`. */
  integrationTimeoutMs?: number;
}

type Segment = { kind: 'static'; value: string } | { kind: 'param'; name: string } | { kind: 'greedy'; name: string };

/** A route with its resource parsed once at startup. */
export interface CompiledRoute {
  readonly route: Route;
  readonly segments: readonly Segment[];
}

/** The outcome of routing a request, before any authorization. */
export type RouteMatch =
  | { kind: 'matched'; compiled: CompiledRoute; pathParameters: Record<string, string> | null }
  | { kind: 'method-not-allowed'; allowed: readonly string[] }
  | { kind: 'not-found' };

/**
 * Parses every route's resource and rejects a route table that API Gateway would reject at deploy time: a bad
 * template, a greedy variable that is not last, or the same method defined twice on one resource.
 */
export function compileRoutes(routes: readonly Route[]): CompiledRoute[] {
  const seen = new Set<string>();
  return routes.map((route) => {
    const key = `${route.method} ${route.resource}`;
    if (seen.has(key)) throw new Error(`route defined twice: ${key}`);
    seen.add(key);
    return { route, segments: parseResource(route.resource) };
  });
}

function parseResource(resource: string): Segment[] {
  if (!resource.startsWith('/')) throw new Error(`resource must start with '/': ${resource}`);
  const parts = resource === '/' ? [] : resource.slice(1).split('/');
  return parts.map((part, index): Segment => {
    const variable = /^\{([A-Za-z0-9_.-]+)(\+?)\}$/.exec(part);
    if (!variable) {
      if (part === '' || /[{}]/.test(part)) throw new Error(`invalid resource segment '${part}' in ${resource}`);
      return { kind: 'static', value: part };
    }
    const name = variable[1] as string;
    if (variable[2] !== '+') return { kind: 'param', name };
    if (index !== parts.length - 1) throw new Error(`a greedy variable must be the last segment: ${resource}`);
    return { kind: 'greedy', name };
  });
}

/**
 * Finds the route for a request the way API Gateway resolves resources: the most specific resource wins (a static
 * segment beats a `{param}`, which beats a `{proxy+}`), then the method, falling back to `ANY`.
 *
 * Path parameter values are URL-decoded, as API Gateway passes them to a REST proxy integration.
 */
export function matchRoute(routes: readonly CompiledRoute[], method: string, pathname: string): RouteMatch {
  const requestSegments = splitPath(pathname);
  let best: { score: number[]; candidates: CompiledRoute[]; params: Record<string, string> } | undefined;
  for (const compiled of routes) {
    const match = matchSegments(compiled.segments, requestSegments);
    if (!match) continue;
    const order = best ? compareScores(match.score, best.score) : 1;
    if (order > 0) best = { score: match.score, candidates: [compiled], params: match.params };
    else if (order === 0 && best) best.candidates.push(compiled);
  }
  if (!best) return { kind: 'not-found' };
  const compiled =
    best.candidates.find((candidate) => candidate.route.method === method) ??
    best.candidates.find((candidate) => candidate.route.method === 'ANY');
  if (!compiled) return { kind: 'method-not-allowed', allowed: best.candidates.map((c) => c.route.method) };
  const params = paramsFor(compiled, requestSegments);
  return { kind: 'matched', compiled, pathParameters: Object.keys(params).length > 0 ? params : null };
}

/** `/a/b/` and `/a/b` are the same resource path; `/` has no segments. */
function splitPath(pathname: string): string[] {
  const parts = pathname.split('/').slice(1);
  if (parts.at(-1) === '') parts.pop();
  return parts;
}

const SEGMENT_SCORE = { static: 2, param: 1, greedy: 0 } as const;

function matchSegments(
  segments: readonly Segment[],
  request: readonly string[],
): { score: number[]; params: Record<string, string> } | undefined {
  const params: Record<string, string> = {};
  const score: number[] = [];
  for (const [index, segment] of segments.entries()) {
    score.push(SEGMENT_SCORE[segment.kind]);
    if (segment.kind === 'greedy') {
      const rest = request.slice(index);
      if (rest.length === 0) return undefined; // `{proxy+}` needs at least one segment, as on API Gateway
      params[segment.name] = rest.map(decodeSegment).join('/');
      return { score, params };
    }
    const value = request[index];
    if (value === undefined) return undefined;
    if (segment.kind === 'static' && decodeSegment(value) !== segment.value) return undefined;
    if (segment.kind === 'param') params[segment.name] = decodeSegment(value);
  }
  return segments.length === request.length ? { score, params } : undefined;
}

/** Re-derives the parameters for the chosen route (candidates of equal score share a resource shape). */
function paramsFor(compiled: CompiledRoute, request: readonly string[]): Record<string, string> {
  return matchSegments(compiled.segments, request)?.params ?? {};
}

function compareScores(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const difference = (a[i] as number) - (b[i] as number);
    if (difference !== 0) return difference;
  }
  return a.length - b.length;
}

/** A malformed escape (`%zz`) is passed through as sent rather than failing the request. */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
