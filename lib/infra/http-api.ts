import { Duration, Validations } from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import {
  HttpApi,
  HttpMethod,
  HttpNoneAuthorizer,
  HttpStage,
  type IHttpRouteAuthorizer,
  LogGroupLogDestination,
} from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpLambdaAuthorizer, HttpLambdaResponseType } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import { LogGroup } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { type PaymentsApiProps, STAGE_NAME } from './api';

/**
 * Access log fields of an HTTP API (its own context variables), one JSON object per request. No header is logged:
 * the Authorization header carries the API key. `accountId` is the account the authorizer resolved the key to.
 */
const ACCESS_LOG_FIELDS = {
  requestId: '$context.requestId',
  extendedRequestId: '$context.extendedRequestId',
  requestTime: '$context.requestTimeEpoch',
  ip: '$context.identity.sourceIp',
  userAgent: '$context.identity.userAgent',
  method: '$context.httpMethod',
  routeKey: '$context.routeKey',
  protocol: '$context.protocol',
  status: '$context.status',
  responseLength: '$context.responseLength',
  responseLatency: '$context.responseLatency',
  integrationStatus: '$context.integrationStatus',
  integrationLatency: '$context.integrationLatency',
  integrationError: '$context.integrationErrorMessage',
  accountId: '$context.authorizer.accountId',
  authorizerError: '$context.authorizer.error',
  errorType: '$context.error.responseType',
  errorMessage: '$context.error.message',
};

/**
 * The payments API as an HTTP API (payload 2.0), for an environment with `api: 'http'`: one route per function, each
 * a Lambda proxy integration, behind a Lambda REQUEST authorizer (the same function as the REST API's TOKEN
 * authorizer, answering with a simple response here) cached per Authorization header. The functions are the same:
 * they read either event and answer in its format.
 *
 * What it has not, against the REST API: WAF (it can't be attached to an HTTP API: the stage throttle is the only
 * rate limit), request validation (the functions validate every body themselves, as they also do behind the REST API),
 * a pattern check of the Authorization header before the authorizer runs (the authorizer refuses a malformed one), and
 * problem+json for API Gateway's own errors (a missing Authorization header is its 401, an unknown key its 403, each
 * `{"message": ...}`). Access logs are JSON in CloudWatch; HTTP APIs write no execution logs.
 */
export class PaymentsHttpApi extends Construct {
  readonly api: HttpApi;
  readonly stage: HttpStage;

  constructor(scope: Construct, id: string, { config, routes, authorizer }: PaymentsApiProps) {
    super(scope, id);
    const accessLogs = new LogGroup(this, 'AccessLogs', {
      retention: config.logRetention,
      removalPolicy: config.removalPolicy,
    });
    this.api = new HttpApi(this, 'Api', {
      apiName: `keystone-payments-${config.name}`,
      description: `Keystone payments API (${config.name}, HTTP API)`,
      createDefaultStage: false,
    });
    // The REST API's stage name, so a client's base URL ends in /v1 behind either.
    this.stage = new HttpStage(this, 'Stage', {
      httpApi: this.api,
      stageName: STAGE_NAME,
      autoDeploy: true,
      throttle: { rateLimit: config.throttling.rateLimit, burstLimit: config.throttling.burstLimit },
      accessLogSettings: {
        destination: new LogGroupLogDestination(accessLogs),
        format: AccessLogFormat.custom(JSON.stringify(ACCESS_LOG_FIELDS)),
      },
    });

    const lambdaAuthorizer = authorizer
      ? new HttpLambdaAuthorizer('Authorizer', authorizer, {
          authorizerName: `keystone-payments-${config.name}`,
          identitySource: ['$request.header.Authorization'],
          // A simple response ({ isAuthorized, context }): payload 2.0 to the authorizer, its context to the routes'
          // `requestContext.authorizer.lambda`. Cached per key, as the REST API's: a revoked key keeps working until
          // its cached answer expires.
          responseTypes: [HttpLambdaResponseType.SIMPLE],
          resultsCacheTtl: Duration.seconds(config.authorizer.cacheSeconds),
        })
      : undefined;

    for (const route of routes) {
      const { trigger } = route;
      let routeAuthorizer: IHttpRouteAuthorizer;
      if (trigger.authorization.kind === 'none') {
        routeAuthorizer = new HttpNoneAuthorizer();
      } else if (lambdaAuthorizer) {
        routeAuthorizer = lambdaAuthorizer;
      } else {
        throw new Error(`Route ${route.id} needs the Lambda authorizer, and no function is one`);
      }
      const [created] = this.api.addRoutes({
        path: trigger.path,
        methods: [HttpMethod[trigger.method]],
        integration: new HttpLambdaIntegration(`${route.id}Integration`, route.handler, {
          // Shorter than the function's own timeout (timing.ts checks it): on a 503 the function still finishes and
          // records its result, which the client's retry then replays.
          timeout: Duration.seconds(config.timeouts.apiIntegrationSeconds),
        }),
        authorizer: routeAuthorizer,
      });
      if (created && trigger.authorization.kind === 'none') {
        Validations.of(created).acknowledge({ id: 'AwsSolutions-APIG4', reason: trigger.authorization.reason });
      }
    }
  }

  /** The stage's URL, ending in `/v1/`. */
  get url(): string {
    return this.stage.url;
  }
}
