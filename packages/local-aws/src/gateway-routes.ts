/**
 * Routing, as both local gateways do it: a REST API resolves a request to a resource and method, an HTTP API to a
 * route; both by the most specific path template, with `ANY` for any method not defined on its own.
 */

/** The methods a route can be defined for; `ANY` catches every method not defined on its own. */
export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD' | 'OPTIONS' | 'ANY';

type Segment = { kind: 'static'; value: string } | { kind: 'param'; name: string } | { kind: 'greedy'; name: string };

/**
 * What routing needs of a route, in either API: its method and its path template (a REST API's resource path, an
 * HTTP API's route path; both use `{name}` and a last `{name+}`, and both resolve a request to the most specific).
 */
export interface RouteTemplate {
  readonly method: HttpMethod;
  readonly template: string;
}

/** A route with its template parsed once at startup. */
export interface CompiledRoute<R> {
  readonly route: R;
  readonly method: HttpMethod;
  readonly template: string;
  readonly segments: readonly Segment[];
}

/** The outcome of routing a request, before any authorization. */
export type RouteMatch<R> =
  | { kind: 'matched'; compiled: CompiledRoute<R>; pathParameters: Record<string, string> | null }
  | { kind: 'method-not-allowed'; allowed: readonly string[] }
  | { kind: 'not-found' };

/**
 * Parses every route's template and rejects a route table that API Gateway would reject at deploy time: a bad
 * template, a greedy variable that is not last, or the same method defined twice on one path.
 */
export function compileRoutes<R>(routes: readonly R[], templateOf: (route: R) => RouteTemplate): CompiledRoute<R>[] {
  const seen = new Set<string>();
  return routes.map((route) => {
    const { method, template } = templateOf(route);
    const key = `${method} ${template}`;
    if (seen.has(key)) throw new Error(`route defined twice: ${key}`);
    seen.add(key);
    return { route, method, template, segments: parseTemplate(template) };
  });
}

function parseTemplate(template: string): Segment[] {
  if (!template.startsWith('/')) throw new Error(`a route path must start with '/': ${template}`);
  const parts = template === '/' ? [] : template.slice(1).split('/');
  return parts.map((part, index): Segment => {
    const variable = /^\{([A-Za-z0-9_.-]+)(\+?)\}$/.exec(part);
    if (!variable) {
      if (part === '' || /[{}]/.test(part)) throw new Error(`invalid path segment '${part}' in ${template}`);
      return { kind: 'static', value: part };
    }
    const name = variable[1] as string;
    if (variable[2] !== '+') return { kind: 'param', name };
    if (index !== parts.length - 1) throw new Error(`a greedy variable must be the last segment: ${template}`);
    return { kind: 'greedy', name };
  });
}

/**
 * Finds the route for a request the way API Gateway resolves resources and routes: the most specific template wins
 * (a static segment beats a `{param}`, which beats a `{proxy+}`), then the method, falling back to `ANY`.
 *
 * Path parameter values are URL-decoded, as API Gateway passes them to a proxy integration.
 */
export function matchRoute<R>(routes: readonly CompiledRoute<R>[], method: string, pathname: string): RouteMatch<R> {
  const requestSegments = splitPath(pathname);
  let best: { score: number[]; candidates: CompiledRoute<R>[]; params: Record<string, string> } | undefined;
  for (const compiled of routes) {
    const match = matchSegments(compiled.segments, requestSegments);
    if (!match) continue;
    const order = best ? compareScores(match.score, best.score) : 1;
    if (order > 0) best = { score: match.score, candidates: [compiled], params: match.params };
    else if (order === 0 && best) best.candidates.push(compiled);
  }
  if (!best) return { kind: 'not-found' };
  const compiled =
    best.candidates.find((candidate) => candidate.method === method) ??
    best.candidates.find((candidate) => candidate.method === 'ANY');
  if (!compiled) return { kind: 'method-not-allowed', allowed: best.candidates.map((c) => c.method) };
  const params = paramsFor(compiled, requestSegments);
  return { kind: 'matched', compiled, pathParameters: Object.keys(params).length > 0 ? params : null };
}

/** `/a/b/` and `/a/b` are the same path; `/` has no segments. */
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

/** Re-derives the parameters for the chosen route (candidates of equal score share a template shape). */
function paramsFor<R>(compiled: CompiledRoute<R>, request: readonly string[]): Record<string, string> {
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
