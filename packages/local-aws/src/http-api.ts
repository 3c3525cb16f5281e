import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type GatewayRequest, readBody, splitUrl } from './gateway-request';
import { type CompiledRoute, compileRoutes, type HttpMethod, matchRoute } from './gateway-routes';
import { defaultFunctionName, GatewayServer, integrate, type RunningGateway } from './gateway-server';
import { authorizeRequest, type RequestAuthorizerCache, type RequestAuthorizerConfig } from './http-api-authorizer';
import {
  buildHttpApiEvent,
  buildRequestAuthorizerEvent,
  type HttpApiEvent,
  type HttpApiRouting,
} from './http-api-event';
import { HTTP_API_ERRORS, readFunctionResult, writeFunctionResponse, writeHttpApiError } from './http-api-response';
import { DEFAULT_FUNCTION_TIMEOUT_MS, LOCAL_ACCOUNT_ID, LOCAL_REGION } from './lambda-context';
import type { LambdaHandler } from './lambda-invoke';
import { consoleLog, type LocalLog } from './log';

export type { RequestAuthorizer, RequestAuthorizerConfig } from './http-api-authorizer';
export type { HttpApiEvent } from './http-api-event';
export { HTTP_API_ERRORS } from './http-api-response';

/** An HTTP API's defaults: 30 s integration timeout (its maximum), 10 MB payload (a hard limit). */
const DEFAULT_INTEGRATION_TIMEOUT_MS = 30_000;
const MAX_PAYLOAD_BYTES = 10 * 1024 * 1024;

/** The stage every local event carries: the one an HTTP API serves at its root. */
const DEFAULT_STAGE = '$default';
const LOCAL_API_ID = 'local';

/**
 * A function behind an HTTP API route (payload format 2.0): it returns a response (`statusCode`, `headers`,
 * `cookies`, `body`) or any other value, which becomes a 200 JSON body.
 */
export type HttpApiHandler = LambdaHandler<HttpApiEvent, unknown>;

/** One route (a method and a path), integrated with one Lambda function. */
export interface HttpApiRoute {
  method: HttpMethod;
  /** The route's path: `/payments`, `/payments/{id}`, `/files/{proxy+}` (greedy, last segment only). */
  path: string;
  handler: HttpApiHandler;
  /** A Lambda REQUEST authorizer with simple responses. */
  authorizer?: RequestAuthorizerConfig;
  /** The function's name in the context and in logs. Default: derived from method and path. */
  functionName?: string;
  /** The Lambda function's timeout. Default: the API's `functionTimeoutMs`. */
  timeoutMs?: number;
  /** This route's integration timeout. Default: the API's `integrationTimeoutMs`. */
  integrationTimeoutMs?: number;
}

export interface HttpApiOptions {
  /** 0 (the default) picks a free port. The server listens on 127.0.0.1 only. */
  port?: number;
  routes: readonly HttpApiRoute[];
  /** How long the API waits for the integration before answering 503. Default 30000, an HTTP API's. */
  integrationTimeoutMs?: number;
  /** Lambda timeout for routes and authorizers that set none. Default 3000, Lambda's and CDK's default. */
  functionTimeoutMs?: number;
  /** Request body limit; default 10 MB, an HTTP API's. */
  maxPayloadBytes?: number;
  /** Where function errors and timeouts go (never to the client). Default: the console. */
  log?: LocalLog;
}

/** A running local HTTP API: its URL (the `$default` stage, at the root) and how to stop it. */
export type HttpApi = RunningGateway;

/**
 * Starts an HTTP server that behaves like an API Gateway HTTP API with Lambda proxy integrations on payload format
 * 2.0, so the local stack runs the very handlers that are deployed behind one, with the events, authorizer answers
 * and errors they get there: the REQUEST authorizer's 401 (no identity source) and 403 (`isAuthorized: false`), 500
 * for a function that fails, times out or answers something unusable, 503 at the integration timeout, 404 for a path
 * or method no route has, each as the API's own `{"message": ...}`.
 *
 * It shares its route table's semantics, the Lambda invocation and the two timeouts with the local REST API
 * (api-gateway.ts); it knows nothing of what runs behind it.
 *
 * Differences from a deployed HTTP API, chosen for local use:
 * - it serves the `$default` stage, at the root (`/payments`); a named stage (`v1`, as lib/infra deploys) would be
 *   a path prefix, and part of `rawPath`;
 * - a handler can't be stopped at its timeout in one Node process: it keeps running, its late result is dropped;
 * - no `$default` route, no JWT or IAM authorizers, no IAM-policy answers from a Lambda authorizer (simple responses
 *   only), no CORS, throttling, parameter mapping or custom domains.
 *
 * @example
 * const api = await startHttpApi({
 *   routes: [{ method: 'POST', path: '/payments', handler: createPayment, authorizer: { handler: authorize } }],
 * });
 * await fetch(`${api.url}/payments`, { method: 'POST', headers: { Authorization: 'Bearer t' }, body: '{}' });
 * await api.close();
 */
export async function startHttpApi(options: HttpApiOptions): Promise<HttpApi> {
  const api = new LocalHttpApi(options);
  return api.server.listen(options.port ?? 0);
}

class LocalHttpApi {
  readonly server: GatewayServer;
  private readonly routes: CompiledRoute<HttpApiRoute>[];
  private readonly integrationTimeoutMs: number;
  private readonly functionTimeoutMs: number;
  private readonly maxPayloadBytes: number;
  private readonly log: LocalLog;
  private readonly authorizerCache: RequestAuthorizerCache = new WeakMap();

  constructor(options: HttpApiOptions) {
    this.routes = compileRoutes(options.routes, (route) => ({ method: route.method, template: route.path }));
    this.integrationTimeoutMs = options.integrationTimeoutMs ?? DEFAULT_INTEGRATION_TIMEOUT_MS;
    this.functionTimeoutMs = options.functionTimeoutMs ?? DEFAULT_FUNCTION_TIMEOUT_MS;
    this.maxPayloadBytes = options.maxPayloadBytes ?? MAX_PAYLOAD_BYTES;
    this.log = options.log ?? consoleLog;
    this.server = new GatewayServer(
      (req, res) => this.handle(req, res),
      (res, error) => this.failUnexpectedly(res, error),
    );
  }

  /** Routing, then body, then authorizer, then the integration. */
  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const requestId = newRequestId();
    const receivedAt = Date.now();
    const { rawPath, rawQuery } = splitUrl(req.url ?? '/');
    const method = req.method ?? 'GET';
    const match = matchRoute(this.routes, method, rawPath);
    if (match.kind !== 'matched') {
      req.resume();
      return writeHttpApiError(res, HTTP_API_ERRORS.notFound, requestId);
    }
    const body = await readBody(req, this.maxPayloadBytes);
    if (body === 'too-large') return writeHttpApiError(res, HTTP_API_ERRORS.requestTooLarge, requestId);

    const { route, template } = match.compiled;
    const request: GatewayRequest = {
      method,
      rawHeaders: req.rawHeaders,
      rawPath,
      rawQuery,
      body,
      sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
      serverPort: this.server.port,
      receivedAt,
    };
    const routing: HttpApiRouting = {
      requestId,
      routeKey: `${route.method} ${template}`,
      pathParameters: match.pathParameters,
      stage: DEFAULT_STAGE,
      apiId: LOCAL_API_ID,
      accountId: LOCAL_ACCOUNT_ID,
    };

    let authorizerContext: Readonly<Record<string, unknown>> | undefined;
    if (route.authorizer) {
      const query = new URLSearchParams(rawQuery);
      const outcome = await authorizeRequest(route.authorizer, {
        header: (name) => headerOf(req.rawHeaders, name),
        query: (name) => (query.has(name) ? query.getAll(name).join(',') : undefined),
        event: (identity) => buildRequestAuthorizerEvent(request, routing, identity, this.routeArn(method, rawPath)),
        functionTimeoutMs: this.functionTimeoutMs,
        cache: this.authorizerCache,
        log: this.log,
        now: Date.now,
      });
      if (outcome.kind === 'unauthorized') return writeHttpApiError(res, HTTP_API_ERRORS.unauthorized, requestId);
      if (outcome.kind === 'forbidden') return writeHttpApiError(res, HTTP_API_ERRORS.forbidden, requestId);
      if (outcome.kind === 'failed') return writeHttpApiError(res, HTTP_API_ERRORS.internalError, requestId);
      authorizerContext = outcome.context;
    }

    const event = buildHttpApiEvent(request, routing, authorizerContext);
    await this.integrate(route, event, requestId, res);
  }

  /**
   * Invokes the route's function and answers with its response, or 500 when it fails, runs past its own timeout,
   * answers something the API can't use or was throttled (an HTTP API has no gateway response to map that to), or
   * 503 when the integration timeout passes first (the handler keeps running, as the Lambda invocation does on AWS).
   */
  private async integrate(route: HttpApiRoute, event: HttpApiEvent, requestId: string, res: ServerResponse) {
    const target = {
      handler: route.handler,
      functionName: route.functionName ?? defaultFunctionName(route.method, route.path),
      timeoutMs: route.timeoutMs ?? this.functionTimeoutMs,
      integrationTimeoutMs: route.integrationTimeoutMs ?? this.integrationTimeoutMs,
    };
    const { outcome, logDetails } = await integrate(target, event, { requestId, server: this.server, log: this.log });
    if (outcome.kind === 'integration-timed-out') {
      return writeHttpApiError(res, HTTP_API_ERRORS.serviceUnavailable, requestId);
    }
    if (outcome.kind !== 'returned') return writeHttpApiError(res, HTTP_API_ERRORS.internalError, requestId);
    const response = readFunctionResult(outcome.value);
    if ('malformed' in response) {
      this.log.error(`Malformed Lambda response (payload 2.0): ${response.malformed}`, {
        ...logDetails,
        result: outcome.value,
      });
      return writeHttpApiError(res, HTTP_API_ERRORS.internalError, requestId);
    }
    writeFunctionResponse(res, response, requestId);
  }

  /** The route ARN a REQUEST authorizer is given: stage, method, and the request's path (not the template). */
  private routeArn(method: string, rawPath: string): string {
    const path = rawPath.replace(/^\/+/, '');
    return `arn:aws:execute-api:${LOCAL_REGION}:${LOCAL_ACCOUNT_ID}:${LOCAL_API_ID}/${DEFAULT_STAGE}/${method}/${path}`;
  }

  /** A bug in the emulator itself: log it, and answer like the API's own internal error if still possible. */
  private failUnexpectedly(res: ServerResponse, error: unknown): void {
    this.log.error('local HTTP API failed', { error });
    if (!res.headersSent) writeHttpApiError(res, HTTP_API_ERRORS.internalError, 'unknown');
    else res.destroy();
  }
}

/** A request header by case-insensitive name, a repeated one comma-joined (as payload 2.0 has it), or undefined. */
function headerOf(rawHeaders: readonly string[], name: string): string | undefined {
  const wanted = name.toLowerCase();
  const values: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() === wanted) values.push(rawHeaders[i + 1]!);
  }
  return values.length === 0 ? undefined : values.join(',');
}

/** An HTTP API's request ids look like `RL2XYiwjPHcEMEQ=`: 11 random bytes in base64. */
function newRequestId(): string {
  return randomBytes(11).toString('base64');
}
