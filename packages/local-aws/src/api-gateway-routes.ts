import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import type { TokenAuthorizer, TokenAuthorizerConfig } from './api-gateway-authorizer';
import type { HttpMethod, RouteTemplate } from './gateway-routes';
import type { LambdaHandler } from './lambda-invoke';

export type { HttpMethod } from './gateway-routes';

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

/** A REST API route's method and resource, for the shared routing (gateway-routes.ts). */
export const restRouteTemplate = (route: Route): RouteTemplate => ({ method: route.method, template: route.resource });
