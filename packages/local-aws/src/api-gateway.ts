import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { type AuthorizerCache, authorize } from './api-gateway-authorizer';
import { buildProxyEvent } from './api-gateway-event';
import {
  GATEWAY_RESPONSES,
  type GatewayResponse,
  type GatewayResponseFormat,
  type MappedGatewayResponse,
  malformedReason,
  writeGatewayResponse,
  writeMappedGatewayResponse,
  writeProxyResult,
} from './api-gateway-response';
import { type Route, restRouteTemplate } from './api-gateway-routes';
import { type GatewayRequest, header, readBody, splitUrl } from './gateway-request';
import { type CompiledRoute, compileRoutes, matchRoute } from './gateway-routes';
import { defaultFunctionName, GatewayServer, integrate, type RunningGateway } from './gateway-server';
import { DEFAULT_FUNCTION_TIMEOUT_MS, LOCAL_ACCOUNT_ID, LOCAL_REGION } from './lambda-context';
import { consoleLog, type LocalLog } from './log';

export type { TokenAuthorizer, TokenAuthorizerConfig } from './api-gateway-authorizer';
export { GATEWAY_RESPONSES, type MappedGatewayResponse } from './api-gateway-response';
export type { HttpMethod, ProxyHandler, Route } from './api-gateway-routes';

/** A REST API's defaults: 29 s integration timeout (a regional API may raise it), 10 MB payload (a hard limit). */
const DEFAULT_INTEGRATION_TIMEOUT_MS = 29_000;
const MAX_PAYLOAD_BYTES = 10 * 1024 * 1024;

/** The stage and API id in every local ARN and `requestContext`. */
const LOCAL_STAGE = 'local';
const LOCAL_API_ID = 'local';

export interface ApiGatewayOptions {
  /** 0 (the default) picks a free port. The server listens on 127.0.0.1 only. */
  port?: number;
  routes: readonly Route[];
  /** How long API Gateway waits for the integration before answering 504. Default 29000, API Gateway's. */
  integrationTimeoutMs?: number;
  /** Lambda timeout for routes and authorizers that set none. Default 3000, Lambda's and CDK's default. */
  functionTimeoutMs?: number;
  /** Content types passed to the handler base64-encoded, like the REST API's `binaryMediaTypes`. */
  binaryMediaTypes?: readonly string[];
  /** Request body limit; default 10 MB, API Gateway's. */
  maxPayloadBytes?: number;
  /** Where handler errors and timeouts go (never to the client). Default: the console. */
  log?: LocalLog;
  /** How the gateway's own errors look; match the deployed API's gateway responses. Default `aws-default`. */
  gatewayResponseFormat?: GatewayResponseFormat;
  /**
   * The INTEGRATION_FAILURE gateway response, as the deployed API maps it: what a throttled invocation is answered
   * with. Default API Gateway's own, a 500.
   */
  integrationFailureResponse?: MappedGatewayResponse;
}

/** A running local API Gateway (a REST API): its URL, without a stage prefix, and how to stop it. */
export type ApiGateway = RunningGateway;

/**
 * Starts an HTTP server that behaves like an API Gateway REST API with Lambda proxy integrations, so the local stack
 * runs the very handlers that are deployed, with the events, contexts, authorizer decisions and error responses
 * they get on AWS.
 *
 * Differences from a deployed REST API, chosen for local use:
 * - a path no route matches answers 404 `{"message":"Not Found"}` and a known path with an undefined method 405 with
 *   an `Allow` header; a deployed REST API answers 403 `{"message":"Missing Authentication Token"}` to both;
 * - there is no stage prefix in the URL (`/payments`, not `/local/payments`), while events carry stage `local`;
 * - a handler can't be stopped at its timeout in one Node process: it keeps running, its late result is dropped;
 * - CORS, API keys, usage plans, request validators and mapping templates are not emulated.
 *
 * @example
 * const api = await startApiGateway({
 *   routes: [{ method: 'POST', resource: '/payments', handler: createPayment, authorizer: tokenAuthorizer }],
 * });
 * await fetch(`${api.url}/payments`, { method: 'POST', headers: { Authorization: 'Bearer t' }, body: '{}' });
 * await api.close();
 */
export async function startApiGateway(options: ApiGatewayOptions): Promise<ApiGateway> {
  const gateway = new LocalApiGateway(options);
  return gateway.server.listen(options.port ?? 0);
}

/** One request's timing and ids, shared by the steps that answer it. */
interface RequestScope {
  readonly requestId: string;
  readonly receivedAt: number;
}

class LocalApiGateway {
  readonly server: GatewayServer;
  private readonly routes: CompiledRoute<Route>[];
  private readonly integrationTimeoutMs: number;
  private readonly functionTimeoutMs: number;
  private readonly maxPayloadBytes: number;
  private readonly binaryMediaTypes: readonly string[];
  private readonly log: LocalLog;
  private readonly gatewayResponseFormat: GatewayResponseFormat;
  private readonly integrationFailureResponse: MappedGatewayResponse | undefined;
  private readonly authorizerCache: AuthorizerCache = new WeakMap();

  constructor(options: ApiGatewayOptions) {
    this.routes = compileRoutes(options.routes, restRouteTemplate);
    this.integrationTimeoutMs = options.integrationTimeoutMs ?? DEFAULT_INTEGRATION_TIMEOUT_MS;
    this.functionTimeoutMs = options.functionTimeoutMs ?? DEFAULT_FUNCTION_TIMEOUT_MS;
    this.maxPayloadBytes = options.maxPayloadBytes ?? MAX_PAYLOAD_BYTES;
    this.binaryMediaTypes = options.binaryMediaTypes ?? [];
    this.log = options.log ?? consoleLog;
    this.gatewayResponseFormat = options.gatewayResponseFormat ?? 'aws-default';
    this.integrationFailureResponse = options.integrationFailureResponse;
    this.server = new GatewayServer(
      (req, res) => this.handle(req, res),
      (res, error) => this.failUnexpectedly(res, error),
    );
  }

  private gatewayResponse(
    res: ServerResponse,
    response: GatewayResponse,
    requestId: string,
    extraHeaders: Record<string, string> = {},
  ): void {
    writeGatewayResponse(res, response, requestId, extraHeaders, this.gatewayResponseFormat);
  }

  /** Routing, then body, then authorizer, then the integration: the order API Gateway applies them in. */
  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const scope: RequestScope = { requestId: randomUUID(), receivedAt: Date.now() };
    const { rawPath, rawQuery } = splitUrl(req.url ?? '/');
    const method = req.method ?? 'GET';
    const match = matchRoute(this.routes, method, rawPath);
    if (match.kind === 'not-found') {
      req.resume();
      return this.gatewayResponse(res, GATEWAY_RESPONSES.notFound, scope.requestId);
    }
    if (match.kind === 'method-not-allowed') {
      req.resume();
      const allow = { Allow: match.allowed.join(', ') };
      return this.gatewayResponse(res, GATEWAY_RESPONSES.methodNotAllowed, scope.requestId, allow);
    }

    const body = await readBody(req, this.maxPayloadBytes);
    if (body === 'too-large') return this.gatewayResponse(res, GATEWAY_RESPONSES.requestTooLarge, scope.requestId);

    const { route } = match.compiled;
    let authorizerContext: Record<string, string | number> | null = null;
    if (route.authorizer) {
      const outcome = await authorize(route.authorizer, {
        authorizationHeader: header(req.headers as Record<string, string | undefined>, 'authorization'),
        methodArn: this.methodArn(method, rawPath),
        functionTimeoutMs: this.functionTimeoutMs,
        cache: this.authorizerCache,
        log: this.log,
        now: Date.now,
      });
      if (outcome.kind === 'unauthorized') {
        return this.gatewayResponse(res, GATEWAY_RESPONSES.unauthorized, scope.requestId);
      }
      if (outcome.kind === 'forbidden') {
        return this.gatewayResponse(res, GATEWAY_RESPONSES.accessDenied, scope.requestId);
      }
      if (outcome.kind === 'misconfigured') {
        return this.gatewayResponse(res, GATEWAY_RESPONSES.authorizerConfiguration, scope.requestId);
      }
      authorizerContext = outcome.authorizerContext;
    }

    const request: GatewayRequest = {
      method,
      rawHeaders: req.rawHeaders,
      rawPath,
      rawQuery,
      body,
      sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
      serverPort: this.server.port,
      receivedAt: scope.receivedAt,
    };
    const event = buildProxyEvent(request, {
      requestId: scope.requestId,
      resource: route.resource,
      pathParameters: match.pathParameters,
      authorizer: authorizerContext,
      stage: LOCAL_STAGE,
      apiId: LOCAL_API_ID,
      accountId: LOCAL_ACCOUNT_ID,
      binaryMediaTypes: this.binaryMediaTypes,
    });
    await this.integrate(route, event, scope, res);
  }

  /**
   * Invokes the route's function and answers with its result, or with 502 when it fails or returns something
   * API Gateway can't use, with the INTEGRATION_FAILURE response (500, unless mapped) when Lambda throttled it, or
   * with 504 when the integration timeout passes first. In the 504 case the handler keeps running, as the Lambda
   * invocation does on AWS.
   */
  private async integrate(
    route: Route,
    event: Parameters<Route['handler']>[0],
    scope: RequestScope,
    res: ServerResponse,
  ): Promise<void> {
    const target = {
      handler: route.handler,
      functionName: route.functionName ?? defaultFunctionName(route.method, route.resource),
      timeoutMs: route.timeoutMs ?? this.functionTimeoutMs,
      integrationTimeoutMs: route.integrationTimeoutMs ?? this.integrationTimeoutMs,
    };
    const { outcome, logDetails } = await integrate(target, event, {
      requestId: scope.requestId,
      server: this.server,
      log: this.log,
    });
    if (outcome.kind === 'integration-timed-out') {
      return this.gatewayResponse(res, GATEWAY_RESPONSES.integrationTimeout, scope.requestId);
    }
    if (outcome.kind === 'throttled') {
      const mapped = this.integrationFailureResponse;
      if (mapped) return writeMappedGatewayResponse(res, mapped, GATEWAY_RESPONSES.integrationFailure, scope.requestId);
      return this.gatewayResponse(res, GATEWAY_RESPONSES.integrationFailure, scope.requestId);
    }
    if (outcome.kind !== 'returned') {
      return this.gatewayResponse(res, GATEWAY_RESPONSES.functionError, scope.requestId);
    }
    const malformed = malformedReason(outcome.value);
    if (malformed) {
      this.log.error(`Malformed Lambda proxy response: ${malformed}`, { ...logDetails, result: outcome.value });
      return this.gatewayResponse(res, GATEWAY_RESPONSES.functionError, scope.requestId);
    }
    writeProxyResult(res, outcome.value as APIGatewayProxyResult, scope.requestId);
  }

  /** The ARN an authorizer's policy is checked against: stage, method, and the request's path (not the template). */
  private methodArn(method: string, rawPath: string): string {
    const path = rawPath.replace(/^\/+/, '');
    return `arn:aws:execute-api:${LOCAL_REGION}:${LOCAL_ACCOUNT_ID}:${LOCAL_API_ID}/${LOCAL_STAGE}/${method}/${path}`;
  }

  /** A bug in the emulator itself: log it, and answer like API Gateway's own internal error if still possible. */
  private failUnexpectedly(res: ServerResponse, error: unknown): void {
    this.log.error('local API Gateway failed', { error });
    if (!res.headersSent) this.gatewayResponse(res, GATEWAY_RESPONSES.functionError, 'unknown');
    else res.destroy();
  }
}
