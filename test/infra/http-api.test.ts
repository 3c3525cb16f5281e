import { Match, type Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { environments } from '../../lib/infra/environments';
import { PaymentsHttpApi } from '../../lib/infra/http-api';
import type { PaymentsStack } from '../../lib/infra/payments-stack';
import { resourceOf, type SynthesizedApp, synthesize, TESTED_ENVIRONMENTS } from './synth';

/**
 * An environment with `api: 'http'` (or any with `-c api=http`): the same functions behind an HTTP API (payload 2.0)
 * with the Lambda authorizer answering simple responses. The template's shape only: nothing is bundled.
 */
let synthesized: SynthesizedApp;
beforeAll(() => {
  synthesized = synthesize({ bundle: false, api: 'http' });
});
afterAll(() => synthesized?.dispose());

function each(check: (stack: PaymentsStack, template: Template, env: (typeof TESTED_ENVIRONMENTS)[number]) => void) {
  for (const env of TESTED_ENVIRONMENTS) check(synthesized.stacks[env], synthesized.templates[env], env);
}

/** The logical id of a function's L1 resource. */
function functionId(stack: PaymentsStack, id: string): string {
  const fn = stack.functions.get(id)?.function.node.defaultChild;
  if (!fn) throw new Error(`no function ${id}`);
  return stack.getLogicalId(fn as never);
}

function route(template: Template, routeKey: string) {
  const routes = Object.values(
    template.findResources('AWS::ApiGatewayV2::Route', { Properties: { RouteKey: routeKey } }),
  );
  expect(routes).toHaveLength(1);
  return routes[0]!.Properties as Record<string, unknown>;
}

/** The integration a route targets (`integrations/<ref>`), as the template holds it. */
function integrationOf(template: Template, routeProperties: Record<string, unknown>) {
  const target = JSON.stringify(routeProperties.Target);
  const [id] = Object.keys(template.findResources('AWS::ApiGatewayV2::Integration')).filter((logicalId) =>
    target.includes(`"${logicalId}"`),
  );
  if (!id) throw new Error(`no integration in ${target}`);
  return template.toJSON().Resources[id].Properties as Record<string, unknown>;
}

describe('the payments API as an HTTP API', () => {
  it('is an HTTP API instead of the REST API, without the WAF that HTTP APIs can’t have', () => {
    each((stack, template) => {
      expect(stack.api).toBeInstanceOf(PaymentsHttpApi);
      template.resourceCountIs('AWS::ApiGatewayV2::Api', 1);
      template.hasResourceProperties('AWS::ApiGatewayV2::Api', { ProtocolType: 'HTTP' });
      template.resourceCountIs('AWS::ApiGateway::RestApi', 0);
      template.resourceCountIs('AWS::WAFv2::WebACL', 0);
      template.resourceCountIs('AWS::WAFv2::WebACLAssociation', 0);
      template.hasOutput('HttpApiUrl', {});
    });
  });

  it('routes each function as a payload 2.0 proxy integration, with the REST API’s integration timeout', () => {
    each((stack, template, env) => {
      for (const [routeKey, fn] of [
        ['POST /payments', 'PaymentsCreate'],
        ['GET /payments/{id}', 'PaymentsGet'],
        ['POST /webhooks/processor', 'WebhookReceiver'],
      ] as const) {
        const integration = integrationOf(template, route(template, routeKey));
        expect(integration).toMatchObject({
          IntegrationType: 'AWS_PROXY',
          PayloadFormatVersion: '2.0',
          TimeoutInMillis: environments[env].timeouts.apiIntegrationSeconds * 1000,
        });
        expect(JSON.stringify(integration.IntegrationUri)).toContain(`"${functionId(stack, fn)}"`);
      }
      template.resourceCountIs('AWS::ApiGatewayV2::Route', 6);
    });
  });

  it('puts the Lambda authorizer on the payments routes, and none on the webhook', () => {
    each((stack, template) => {
      const [authorizerId] = Object.keys(template.findResources('AWS::ApiGatewayV2::Authorizer'));
      for (const routeKey of ['POST /payments', 'GET /payments/{id}']) {
        expect(route(template, routeKey)).toMatchObject({
          AuthorizationType: 'CUSTOM',
          AuthorizerId: { Ref: authorizerId },
        });
      }
      expect(route(template, 'POST /webhooks/processor')).toMatchObject({ AuthorizationType: 'NONE' });
      expect(stack.functions.has('Authorizer')).toBe(true);
    });
  });

  it('asks the authorizer with payload 2.0 for a simple answer, cached per key as long as the environment says', () => {
    each((stack, template, env) => {
      template.resourceCountIs('AWS::ApiGatewayV2::Authorizer', 1);
      template.hasResourceProperties('AWS::ApiGatewayV2::Authorizer', {
        AuthorizerType: 'REQUEST',
        AuthorizerPayloadFormatVersion: '2.0',
        EnableSimpleResponses: true,
        IdentitySource: ['$request.header.Authorization'],
        AuthorizerResultTtlInSeconds: env === 'dev' ? 0 : 60,
      });
      const [authorizer] = Object.values(template.findResources('AWS::ApiGatewayV2::Authorizer'));
      expect(JSON.stringify(authorizer?.Properties.AuthorizerUri)).toContain(`"${functionId(stack, 'Authorizer')}"`);
      // API Gateway may invoke the authorizer, from this API's authorizers only.
      template.hasResourceProperties('AWS::Lambda::Permission', {
        Action: 'lambda:InvokeFunction',
        Principal: 'apigateway.amazonaws.com',
        FunctionName: { 'Fn::GetAtt': [functionId(stack, 'Authorizer'), 'Arn'] },
        SourceArn: Match.objectLike({ 'Fn::Join': Match.anyValue() }),
      });
    });
  });

  it('throttles the v1 stage as the environment says, and logs each request as JSON without its headers', () => {
    each((_stack, template, env) => {
      template.resourceCountIs('AWS::ApiGatewayV2::Stage', 1);
      const [stage] = Object.values(template.findResources('AWS::ApiGatewayV2::Stage'));
      const properties = stage!.Properties as {
        StageName: string;
        AutoDeploy: boolean;
        DefaultRouteSettings: Record<string, number>;
        AccessLogSettings: { DestinationArn: unknown; Format: string };
      };
      expect(properties.StageName).toBe('v1');
      expect(properties.AutoDeploy).toBe(true);
      expect(properties.DefaultRouteSettings).toMatchObject(
        env === 'dev'
          ? { ThrottlingRateLimit: 10, ThrottlingBurstLimit: 20 }
          : { ThrottlingRateLimit: 200, ThrottlingBurstLimit: 400 },
      );
      const format = JSON.parse(properties.AccessLogSettings.Format) as Record<string, string>;
      expect(format).toMatchObject({
        requestId: '$context.requestId',
        routeKey: '$context.routeKey',
        status: '$context.status',
        accountId: '$context.authorizer.accountId',
      });
      expect(properties.AccessLogSettings.Format.toLowerCase()).not.toContain('authorization');
      const [logGroupId] = Object.keys(template.findResources('AWS::Logs::LogGroup')).filter((id) =>
        JSON.stringify(properties.AccessLogSettings.DestinationArn).includes(`"${id}"`),
      );
      expect(logGroupId).toBeDefined();
    });
  });

  it('alarms on the HTTP API’s 5xx rate', () => {
    each((stack, template) => {
      const api = stack.api as PaymentsHttpApi;
      const apiId = stack.getLogicalId(api.api.node.defaultChild as never);
      const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')).filter((alarm) =>
        JSON.stringify(alarm.Properties.AlarmName).includes('API 5xx rate'),
      );
      expect(alarms).toHaveLength(1);
      const metrics = JSON.stringify(alarms[0]!.Properties.Metrics);
      expect(metrics).toContain('"MetricName":"5xx"');
      expect(metrics).toContain('"MetricName":"Count"');
      expect(metrics).toContain(`"Ref":"${apiId}"`);
    });
  });

  it('needs no API Gateway logging role: an HTTP API writes no execution logs', () => {
    each((stack, template) => {
      expect(JSON.stringify(template.toJSON())).not.toContain('API-Gateway-Execution-Logs');
      expect(resourceOf(template, stack, stack.api.api.node.defaultChild as never).Type).toBe('AWS::ApiGatewayV2::Api');
    });
  });

  it.each(TESTED_ENVIRONMENTS)('passes cdk-nag’s AWS Solutions checks in %s', (env) => {
    const report = new AwsSolutionsChecks().validateScope(synthesized.stacks[env]);
    const findings = report.violations.map(
      (violation) =>
        `${violation.severity} ${violation.ruleName} at ${violation.violatingResources.map((r) => r.constructPath)}`,
    );
    expect(findings).toEqual([]);
  });
});
