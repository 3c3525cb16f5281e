import type { APIGatewayRequestAuthorizerEventV2 } from 'aws-lambda';
import { invokeLambda, type LambdaHandler } from './lambda-invoke';
import type { LocalLog } from './log';

/**
 * A Lambda REQUEST authorizer of an HTTP API, payload format 2.0 with simple responses: the same function the
 * deployed stack attaches to the route. It answers `{ isAuthorized, context? }`.
 */
export type RequestAuthorizer = LambdaHandler<APIGatewayRequestAuthorizerEventV2, unknown>;

/** A REQUEST authorizer with the settings API Gateway keeps on the authorizer resource. */
export interface RequestAuthorizerConfig {
  handler: RequestAuthorizer;
  /** Name in the context and in logs. Default `authorizer`. */
  functionName?: string;
  /**
   * Where the caller's identity is: `$request.header.<name>` (any case) or `$request.querystring.<name>`. A request
   * without every one of them is answered 401 without invoking the function. Default: the Authorization header.
   */
  identitySource?: readonly string[];
  /**
   * How long API Gateway reuses an answer for the same identity source values, for every route behind the authorizer
   * (a simple response allows or denies them all). Default 0 (off) here; API Gateway's own default is 300.
   */
  resultTtlSeconds?: number;
  /** The authorizer function's timeout. Default: the API's `functionTimeoutMs`. */
  timeoutMs?: number;
}

export const DEFAULT_IDENTITY_SOURCE = ['$request.header.Authorization'] as const;

/** What API Gateway decided before the integration runs. */
export type RequestAuthorizationOutcome =
  | { readonly kind: 'allowed'; readonly context: Readonly<Record<string, unknown>> }
  /** An identity source is missing: 401. */
  | { readonly kind: 'unauthorized' }
  /** `isAuthorized: false`: 403. */
  | { readonly kind: 'forbidden' }
  /** The function failed, timed out or answered something else than a simple response: 500. */
  | { readonly kind: 'failed' };

interface Answer {
  readonly isAuthorized: boolean;
  readonly context: Readonly<Record<string, unknown>>;
}

/** Per-authorizer answers keyed by the identity source values, as API Gateway caches them. */
export type RequestAuthorizerCache = WeakMap<
  RequestAuthorizerConfig,
  Map<string, { answer: Answer; expiresAt: number }>
>;

/** What the request offers to the authorizer. */
export interface RequestAuthorization {
  /** A request header by case-insensitive name (a repeated one comma-joined), or undefined. */
  readonly header: (name: string) => string | undefined;
  /** A query string parameter by its exact name, or undefined. */
  readonly query: (name: string) => string | undefined;
  /** The event the function is invoked with, given the identity source values. */
  readonly event: (identitySource: readonly string[]) => APIGatewayRequestAuthorizerEventV2;
  readonly functionTimeoutMs: number;
  readonly cache: RequestAuthorizerCache;
  readonly log: LocalLog;
  readonly now: () => number;
}

/**
 * Runs a REQUEST authorizer with simple responses the way an HTTP API does:
 * - an identity source missing or empty: 401 without invoking the function;
 * - `{ isAuthorized: true, context }`: the integration runs, with `context` as it was returned;
 * - `{ isAuthorized: false }`: 403;
 * - the function throws (whatever its message), times out, or answers anything else: 500.
 * With a cache TTL, an answer (allow or deny) is reused for the same identity source values until it expires.
 */
export async function authorizeRequest(
  config: RequestAuthorizerConfig,
  request: RequestAuthorization,
): Promise<RequestAuthorizationOutcome> {
  const identity = identityValues(config.identitySource ?? DEFAULT_IDENTITY_SOURCE, request);
  if (!identity) return { kind: 'unauthorized' };

  const ttlMs = (config.resultTtlSeconds ?? 0) * 1000;
  const cacheKey = JSON.stringify(identity);
  const cached = ttlMs > 0 ? request.cache.get(config)?.get(cacheKey) : undefined;
  const answer = cached && cached.expiresAt > request.now() ? cached.answer : await invoke(config, identity, request);
  if (!answer) return { kind: 'failed' };
  if (ttlMs > 0 && answer !== cached?.answer) {
    const entries = request.cache.get(config) ?? new Map();
    entries.set(cacheKey, { answer, expiresAt: request.now() + ttlMs });
    request.cache.set(config, entries);
  }
  return answer.isAuthorized ? { kind: 'allowed', context: answer.context } : { kind: 'forbidden' };
}

/** The identity source values in order, or undefined if one is missing or empty. */
function identityValues(sources: readonly string[], request: RequestAuthorization): string[] | undefined {
  const values: string[] = [];
  for (const source of sources) {
    const header = /^\$request\.header\.(.+)$/.exec(source);
    const query = /^\$request\.querystring\.(.+)$/.exec(source);
    if (!header && !query) throw new Error(`unsupported identity source ${source}`);
    const value = header ? request.header(header[1] as string) : request.query(query?.[1] as string);
    if (!value) return undefined;
    values.push(value);
  }
  return values;
}

async function invoke(
  config: RequestAuthorizerConfig,
  identity: readonly string[],
  request: RequestAuthorization,
): Promise<Answer | undefined> {
  const { outcome } = invokeLambda(config.handler, request.event(identity), {
    functionName: config.functionName ?? 'authorizer',
    timeoutMs: config.timeoutMs ?? request.functionTimeoutMs,
  });
  const ended = await outcome;
  if (ended.kind === 'threw') {
    request.log.error('authorizer failed', { error: ended.error });
    return undefined;
  }
  if (ended.kind === 'timed-out') {
    request.log.error(`authorizer timed out after ${ended.timeoutMs} ms`);
    return undefined;
  }
  if (ended.kind === 'throttled') {
    request.log.error(`authorizer throttled: ${ended.error.message}`);
    return undefined;
  }
  const answer = simpleResponse(ended.value);
  if (!answer) request.log.error('authorizer returned a malformed simple response', { result: ended.value });
  return answer;
}

/** `{ isAuthorized: boolean, context?: object }`, or undefined for anything else. */
function simpleResponse(result: unknown): Answer | undefined {
  if (typeof result !== 'object' || result === null || Array.isArray(result)) return undefined;
  const { isAuthorized, context } = result as { isAuthorized?: unknown; context?: unknown };
  if (typeof isAuthorized !== 'boolean') return undefined;
  if (context === undefined || context === null) return { isAuthorized, context: {} };
  if (typeof context !== 'object' || Array.isArray(context)) return undefined;
  return { isAuthorized, context: context as Record<string, unknown> };
}
