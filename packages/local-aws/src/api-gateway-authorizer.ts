import type { APIGatewayAuthorizerResult, APIGatewayTokenAuthorizerEvent, PolicyDocument, Statement } from 'aws-lambda';
import { invokeLambda, type LambdaHandler } from './lambda-invoke';
import type { LocalLog } from './log';

/** A Lambda TOKEN authorizer: the same function the deployed stack attaches to the method. */
export type TokenAuthorizer = LambdaHandler<APIGatewayTokenAuthorizerEvent, APIGatewayAuthorizerResult>;

/** A TOKEN authorizer with the settings API Gateway keeps on the authorizer resource. */
export interface TokenAuthorizerConfig {
  handler: TokenAuthorizer;
  /** Name in the context and in logs. Default `authorizer`. */
  functionName?: string;
  /**
   * How long API Gateway reuses a policy for the same token. Default 0 (off) here; API Gateway's own default is
   * 300. Turn it on to reproduce the classic bug: a policy scoped to one method ARN, cached, then applied to
   * another method of the same API, which is denied until the cache entry expires.
   */
  resultTtlSeconds?: number;
  /** The authorizer function's timeout. Default: the gateway's `functionTimeoutMs`. */
  timeoutMs?: number;
}

/** What API Gateway decided before the integration runs. */
export type AuthorizationOutcome =
  | { kind: 'allowed'; authorizerContext: Record<string, string | number> }
  | { kind: 'unauthorized' }
  | { kind: 'forbidden' }
  | { kind: 'misconfigured' };

interface CachedResult {
  readonly result: APIGatewayAuthorizerResult;
  readonly expiresAt: number;
}

/** Per-authorizer policy cache keyed by token, as API Gateway caches on the identity source. */
export type AuthorizerCache = WeakMap<TokenAuthorizerConfig | TokenAuthorizer, Map<string, CachedResult>>;

/** The settings that describe where the request is going, for the method ARN and the function context. */
export interface AuthorizationRequest {
  readonly authorizationHeader: string | undefined;
  readonly methodArn: string;
  readonly functionTimeoutMs: number;
  readonly cache: AuthorizerCache;
  readonly log: LocalLog;
  readonly now: () => number;
}

/**
 * Runs a TOKEN authorizer the way API Gateway does and evaluates the policy it returns against the method ARN.
 *
 * - no (or an empty) `Authorization` header: 401 without invoking the function;
 * - the function throws `Error('Unauthorized')`: 401; any other error, a timeout or a malformed result: 500
 *   (API Gateway's `AuthorizerConfigurationException`);
 * - the policy has no matching Allow, or a matching Deny: 403;
 * - otherwise the integration runs, with the result's `context` (values stringified, as API Gateway does) and
 *   `principalId` in `requestContext.authorizer`.
 */
export async function authorize(
  authorizer: TokenAuthorizer | TokenAuthorizerConfig,
  request: AuthorizationRequest,
): Promise<AuthorizationOutcome> {
  const config = typeof authorizer === 'function' ? { handler: authorizer } : authorizer;
  const token = request.authorizationHeader;
  if (!token) return { kind: 'unauthorized' };

  const result = await authorizerResult(authorizer, config, token, request);
  if (result.kind !== 'returned') return result;
  const context = authorizerContext(result.value);
  if (!context) {
    request.log.error('authorizer returned a malformed result', { result: result.value });
    return { kind: 'misconfigured' };
  }
  if (!isAllowed(result.value.policyDocument, request.methodArn)) return { kind: 'forbidden' };
  return { kind: 'allowed', authorizerContext: context };
}

async function authorizerResult(
  key: TokenAuthorizer | TokenAuthorizerConfig,
  config: TokenAuthorizerConfig,
  token: string,
  request: AuthorizationRequest,
): Promise<{ kind: 'returned'; value: APIGatewayAuthorizerResult } | { kind: 'unauthorized' | 'misconfigured' }> {
  const ttlMs = (config.resultTtlSeconds ?? 0) * 1000;
  const cached = ttlMs > 0 ? request.cache.get(key)?.get(token) : undefined;
  if (cached && cached.expiresAt > request.now()) return { kind: 'returned', value: cached.result };

  const event: APIGatewayTokenAuthorizerEvent = {
    type: 'TOKEN',
    authorizationToken: token,
    methodArn: request.methodArn,
  };
  const { outcome } = invokeLambda(config.handler, event, {
    functionName: config.functionName ?? 'authorizer',
    timeoutMs: config.timeoutMs ?? request.functionTimeoutMs,
  });
  const ended = await outcome;
  if (ended.kind === 'threw') {
    // The one error message API Gateway turns into a 401; any other failure is a misconfigured authorizer.
    if (ended.error instanceof Error && ended.error.message === 'Unauthorized') return { kind: 'unauthorized' };
    request.log.error('authorizer failed', { error: ended.error });
    return { kind: 'misconfigured' };
  }
  if (ended.kind === 'timed-out') {
    request.log.error(`authorizer timed out after ${ended.timeoutMs} ms`);
    return { kind: 'misconfigured' };
  }
  if (ended.kind === 'throttled') {
    request.log.error(`authorizer throttled: ${ended.error.message}`);
    return { kind: 'misconfigured' };
  }
  if (ttlMs > 0) {
    const entries = request.cache.get(key) ?? new Map<string, CachedResult>();
    entries.set(token, { result: ended.value, expiresAt: request.now() + ttlMs });
    request.cache.set(key, entries);
  }
  return { kind: 'returned', value: ended.value };
}

/**
 * Validates the result's shape and builds `requestContext.authorizer`. API Gateway accepts only string, number and
 * boolean context values and hands them to a REST proxy integration as strings; an object or array value makes it
 * fail the request with a 500, so it does here too. Returns undefined for a malformed result.
 */
function authorizerContext(result: unknown): Record<string, string | number> | undefined {
  if (typeof result !== 'object' || result === null) return undefined;
  const { principalId, policyDocument, context } = result as Partial<APIGatewayAuthorizerResult>;
  if (typeof principalId !== 'string' || !isPolicyDocument(policyDocument)) return undefined;
  const out: Record<string, string | number> = {};
  for (const [name, value] of Object.entries(context ?? {})) {
    if (value === null || value === undefined) continue;
    if (!['string', 'number', 'boolean'].includes(typeof value)) return undefined;
    out[name] = String(value);
  }
  out.principalId = principalId;
  // API Gateway adds the authorizer's latency; a local call has none worth reporting.
  out.integrationLatency = 0;
  return out;
}

function isPolicyDocument(value: unknown): value is PolicyDocument {
  if (typeof value !== 'object' || value === null) return false;
  const statement = (value as { Statement?: unknown }).Statement;
  return Array.isArray(statement) || (typeof statement === 'object' && statement !== null);
}

/**
 * IAM evaluation, reduced to what an execute-api policy uses: an explicit Deny that matches wins, otherwise a
 * matching Allow is required. `Statement` may be one object or an array, `Action`/`Resource` a string or an array.
 */
export function isAllowed(policy: PolicyDocument, methodArn: string): boolean {
  const statements: Statement[] = Array.isArray(policy.Statement) ? policy.Statement : [policy.Statement];
  const matching = statements.filter((statement) => statementMatches(statement, methodArn));
  if (matching.some((statement) => statement.Effect === 'Deny')) return false;
  return matching.some((statement) => statement.Effect === 'Allow');
}

function statementMatches(statement: Statement, methodArn: string): boolean {
  const actionMatches =
    'Action' in statement
      ? asList(statement.Action).some(matchesInvokeAction)
      : !asList(statement.NotAction).some(matchesInvokeAction);
  if (!actionMatches) return false;
  const { Resource, NotResource } = statement as { Resource?: string | string[]; NotResource?: string | string[] };
  if (Resource !== undefined) return asList(Resource).some((resource) => wildcardMatches(resource, methodArn));
  if (NotResource !== undefined) return !asList(NotResource).some((resource) => wildcardMatches(resource, methodArn));
  return false;
}

/** Action names compare case-insensitively in IAM (`execute-api:invoke` works); resource ARNs don't. */
function matchesInvokeAction(pattern: string): boolean {
  return wildcardMatches(pattern.toLowerCase(), 'execute-api:invoke');
}

function asList(value: string | string[]): string[] {
  return Array.isArray(value) ? value : [value];
}

/** IAM string matching: `*` matches any run of characters (including `/`), `?` exactly one; the rest is literal. */
export function wildcardMatches(pattern: string, value: string): boolean {
  const source = Array.from(pattern, (char) => {
    if (char === '*') return '.*';
    if (char === '?') return '.';
    return char.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }).join('');
  return new RegExp(`^${source}$`).test(value);
}
