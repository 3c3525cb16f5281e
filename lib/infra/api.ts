import { Duration, Validations } from 'aws-cdk-lib';
import {
  AccessLogField,
  AccessLogFormat,
  AuthorizationType,
  type JsonSchema as CdkJsonSchema,
  EndpointType,
  IdentitySource,
  LambdaIntegration,
  LogGroupLogDestination,
  MethodLoggingLevel,
  type MethodOptions,
  type Model,
  type RequestValidator,
  ResponseType,
  RestApi,
  TokenAuthorizer,
} from 'aws-cdk-lib/aws-apigateway';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { LogGroup } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { ProblemType, problemType } from 'keystone-idempotency/http';
import type { JsonSchema } from '../openapi/json-schema';
import type { RequestModel } from '../openapi/request-models';
import { PROBLEM_TYPE_BASE } from '../payments/problem-types';
import type { EnvironmentConfig } from './environments';
import type { RouteTrigger } from './functions';
import { THROTTLED_INTEGRATION } from './throttling';

/** The one stage; each environment has its own API, so the stage names a version, not an environment. */
export const STAGE_NAME = 'v1';

/** What the alarms and the dashboard read of the API, REST or HTTP: its request, error and latency metrics. */
export type ApiMetrics = Pick<RestApi, 'metricCount' | 'metricClientError' | 'metricServerError' | 'metricLatency'>;

/** A route and the function behind it. */
export interface ApiRoute {
  readonly id: string;
  readonly trigger: RouteTrigger;
  readonly handler: IFunction;
}

export interface PaymentsApiProps {
  readonly config: EnvironmentConfig;
  readonly routes: readonly ApiRoute[];
  /** The authorizer's function; required when a route asks for `token` authorization. */
  readonly authorizer?: IFunction;
}

/**
 * Access log fields, one JSON object per request. No header is logged: the Authorization header carries the API
 * key. `principalId` is the account the authorizer resolved the key to.
 */
const ACCESS_LOG_FIELDS = {
  requestId: AccessLogField.contextRequestId(),
  extendedRequestId: AccessLogField.contextExtendedRequestId(),
  requestTime: AccessLogField.contextRequestTimeEpoch(),
  ip: AccessLogField.contextIdentitySourceIp(),
  userAgent: AccessLogField.contextIdentityUserAgent(),
  method: AccessLogField.contextHttpMethod(),
  resourcePath: AccessLogField.contextResourcePath(),
  protocol: AccessLogField.contextProtocol(),
  status: AccessLogField.contextStatus(),
  responseLength: AccessLogField.contextResponseLength(),
  responseLatency: AccessLogField.contextResponseLatency(),
  integrationStatus: AccessLogField.contextIntegrationStatus(),
  integrationLatency: AccessLogField.contextIntegrationLatency(),
  integrationError: AccessLogField.contextIntegrationErrorMessage(),
  principalId: AccessLogField.contextAuthorizerPrincipalId(),
  authorizerError: AccessLogField.contextAuthorizerError(),
  authorizerLatency: AccessLogField.contextAuthorizerIntegrationLatency(),
  wafStatus: AccessLogField.contextWafResponseCode(),
  errorType: AccessLogField.contextErrorResponseType(),
  errorMessage: AccessLogField.contextErrorMessage(),
  xrayTraceId: AccessLogField.contextXrayTraceId(),
};

/**
 * What API Gateway checks in the Authorization header before it invokes the TOKEN authorizer: the shape the
 * authorizer function itself parses (`Bearer <key>`, any case, printable ASCII key). A header of any other shape gets
 * 401 without a Lambda invocation. (Anchored: API Gateway matches it against the whole header.)
 */
export const AUTHORIZATION_HEADER_PATTERN = '^[Bb][Ee][Aa][Rr][Ee][Rr][ \t]+[!-~]+$';

/**
 * The payments REST API, every environment's unless it sets `api: 'http'` (see `PaymentsHttpApi`): one method per
 * route, each a Lambda proxy integration.
 *
 * Why a REST API and not an HTTP API: a Lambda TOKEN authorizer whose result API Gateway caches per key, request
 * validation before a function runs, WAF, and gateway responses shaped as problem+json. There are no usage plans:
 * per-client limits are WAF's per-API-key rate rule (see firewall.ts), which needs no API Gateway API key kept in
 * step with every merchant's key. Access logs are JSON in CloudWatch; execution logs record errors only, never
 * bodies (they hold payment data).
 */
export class PaymentsApi extends Construct {
  readonly api: RestApi;

  constructor(scope: Construct, id: string, { config, routes, authorizer }: PaymentsApiProps) {
    super(scope, id);
    const accessLogs = new LogGroup(this, 'AccessLogs', {
      retention: config.logRetention,
      removalPolicy: config.removalPolicy,
    });
    this.api = new RestApi(this, 'Api', {
      restApiName: `keystone-payments-${config.name}`,
      description: `Keystone payments API (${config.name})`,
      endpointTypes: [EndpointType.REGIONAL],
      // The account-wide logging role is not this stack's to set: see ApiGatewayAccountStack.
      cloudWatchRole: false,
      deployOptions: {
        stageName: STAGE_NAME,
        accessLogDestination: new LogGroupLogDestination(accessLogs),
        accessLogFormat: AccessLogFormat.custom(JSON.stringify(ACCESS_LOG_FIELDS)),
        loggingLevel: MethodLoggingLevel.ERROR,
        dataTraceEnabled: false,
        tracingEnabled: config.tracing,
        throttlingRateLimit: config.throttling.rateLimit,
        throttlingBurstLimit: config.throttling.burstLimit,
      },
    });
    // API Gateway creates the execution log group on first use, with no retention; creating it first sets one.
    new LogGroup(this, 'ExecutionLogs', {
      logGroupName: `API-Gateway-Execution-Logs_${this.api.restApiId}/${STAGE_NAME}`,
      retention: config.logRetention,
      removalPolicy: config.removalPolicy,
    });
    this.problemResponses();

    const validator = this.api.addRequestValidator('Validator', {
      validateRequestBody: true,
      validateRequestParameters: true,
    });
    const tokenAuthorizer = authorizer
      ? new TokenAuthorizer(this, 'TokenAuthorizer', {
          handler: authorizer,
          identitySource: IdentitySource.header('Authorization'),
          validationRegex: AUTHORIZATION_HEADER_PATTERN,
          // Cached per key: a key's account does not change between requests, and this saves an invocation and a
          // DynamoDB read. The price: a revoked key keeps working until its cached answer expires.
          resultsCacheTtl: Duration.seconds(config.authorizer.cacheSeconds),
        })
      : undefined;

    for (const route of routes) {
      const options = this.methodOptions(route, validator, tokenAuthorizer);
      const integration = new LambdaIntegration(route.handler, {
        // Shorter than the function's own timeout (timing.ts checks it): on a 504 the function still finishes and
        // records its result, which the client's retry then replays.
        timeout: Duration.seconds(config.timeouts.apiIntegrationSeconds),
        // No permission for the console's test-invoke: production functions are invoked through the stage only.
        allowTestInvoke: false,
      });
      const method = this.api.root
        .resourceForPath(route.trigger.path)
        .addMethod(route.trigger.method, integration, options);
      const { authorization } = route.trigger;
      if (authorization.kind === 'none') {
        Validations.of(method).acknowledge({ id: 'AwsSolutions-APIG4', reason: authorization.reason });
        Validations.of(method).acknowledge({ id: 'AwsSolutions-COG4', reason: authorization.reason });
      } else {
        Validations.of(method).acknowledge({
          id: 'AwsSolutions-COG4',
          reason:
            'The callers are merchant systems holding API keys, not users of a Cognito user pool; the Lambda TOKEN ' +
            'authorizer resolves each hashed key to its account.',
        });
      }
    }
  }

  private methodOptions(
    route: ApiRoute,
    requestValidator: RequestValidator,
    tokenAuthorizer: TokenAuthorizer | undefined,
  ): MethodOptions {
    const { trigger } = route;
    const pathParameters = [...trigger.path.matchAll(/\{(\w+)\}/g)].map((match) => match[1]);
    const requestParameters = Object.fromEntries(pathParameters.map((name) => [`method.request.path.${name}`, true]));
    const requestModels = trigger.bodyModel ? { 'application/json': this.model(trigger.bodyModel) } : undefined;
    if (trigger.authorization.kind === 'none') {
      return { authorizationType: AuthorizationType.NONE, requestValidator, requestParameters, requestModels };
    }
    if (!tokenAuthorizer) throw new Error(`Route ${route.id} needs the TOKEN authorizer, and no function is one`);
    return {
      authorizationType: AuthorizationType.CUSTOM,
      authorizer: tokenAuthorizer,
      requestValidator,
      requestParameters,
      requestModels,
    };
  }

  /** One API Gateway model per request model, shared by every method that uses it. */
  private model(requestModel: RequestModel): Model {
    const existing = this.api.node.tryFindChild(requestModel.name);
    if (existing) return existing as Model;
    return this.api.addModel(requestModel.name, {
      modelName: requestModel.name,
      contentType: 'application/json',
      description: requestModel.description,
      schema: cdkJsonSchema(requestModel.schema),
    });
  }

  /**
   * Errors API Gateway answers itself (401 from the authorizer, 429 throttled, 400 invalid body, 504 timeout) as
   * RFC 9457 problems, like the functions' own errors, instead of `{"message": ...}`; and a function Lambda throttled
   * (INTEGRATION_FAILURE, a 500 unless mapped) as the 429 with Retry-After that it is (lib/infra/throttling.ts).
   */
  private problemResponses(): void {
    const problem = {
      responseHeaders: { 'Content-Type': "'application/problem+json'" },
      templates: {
        'application/json':
          '{"type":"about:blank","title":$context.error.messageString,"requestId":"$context.requestId"}',
      },
    };
    this.api.addGatewayResponse('Default4xx', { type: ResponseType.DEFAULT_4XX, ...problem });
    // The body model only checks for a JSON object (see jsonObjectModel): say so in the function's own format, so a
    // client sees the same problem type and `errors` list whether the gateway or the function caught it.
    this.api.addGatewayResponse('BadRequestBody', {
      type: ResponseType.BAD_REQUEST_BODY,
      statusCode: '400',
      responseHeaders: problem.responseHeaders,
      templates: {
        'application/json': JSON.stringify({
          type: problemType(ProblemType.invalidBody, PROBLEM_TYPE_BASE),
          title: 'Invalid request body',
          status: 400,
          detail: 'The body must be a JSON object.',
          errors: [{ path: '', message: 'expected a JSON object' }],
          requestId: '$context.requestId',
        }),
      },
    });
    this.api.addGatewayResponse('Default5xx', { type: ResponseType.DEFAULT_5XX, ...problem });
    this.api.addGatewayResponse('ThrottledIntegration', {
      type: ResponseType.INTEGRATION_FAILURE,
      statusCode: String(THROTTLED_INTEGRATION.statusCode),
      // Gateway response header values are literals in single quotes.
      responseHeaders: Object.fromEntries(
        Object.entries(THROTTLED_INTEGRATION.headers).map(([name, value]) => [name, `'${value}'`]),
      ),
      templates: { 'application/json': THROTTLED_INTEGRATION.template },
    });
  }
}

/**
 * CDK's `JsonSchema` spells `$schema`, `$ref` and `$id` without the dollar and puts them back when it renders the
 * model; every other keyword is the JSON Schema one. Converts a plain draft-04 schema to that form.
 */
function cdkJsonSchema(schema: JsonSchema): CdkJsonSchema {
  const renamed: Record<string, string> = { $schema: 'schema', $ref: 'ref', $id: 'id' };
  const convert = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(convert);
    if (typeof value !== 'object' || value === null) return value;
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [renamed[key] ?? key, convert(inner)]));
  };
  return convert(schema) as CdkJsonSchema;
}
