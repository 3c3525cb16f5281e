import type { Stage } from 'aws-cdk-lib/aws-apigateway';
import { CfnWebACL, CfnWebACLAssociation } from 'aws-cdk-lib/aws-wafv2';
import { Construct } from 'constructs';
import { STAGE_NAME } from './api';
import type { EnvironmentConfig, FirewallAction } from './environments';

/** A route the per-IP limit leaves alone, matched exactly: method and path. */
export interface ExemptRoute {
  readonly method: string;
  /** The resource path, without the stage (`/webhooks/processor`). */
  readonly path: string;
}

export interface ApiFirewallProps {
  readonly stage: Stage;
  readonly config: EnvironmentConfig;
  /** Routes whose callers come from a few addresses in bursts and are authenticated otherwise (webhooks). */
  readonly exemptFromIpLimit: readonly ExemptRoute[];
}

type Statement = CfnWebACL.StatementProperty;

/**
 * A WAF web ACL in front of the API stage: AWS's IP reputation list, its known-bad-inputs rules, and two rate limits
 * (see `EnvironmentConfig.firewall`): per API key, and per client IP. The common rule set is left out on purpose: its
 * bot-ish rules (no User-Agent, large bodies) misfire on machine-to-machine callers, which is all this API has.
 */
export class ApiFirewall extends Construct {
  readonly webAcl: CfnWebACL;

  constructor(scope: Construct, id: string, { stage, config, exemptFromIpLimit }: ApiFirewallProps) {
    super(scope, id);
    const metricPrefix = `keystone-${config.name}`;
    const visibility = (name: string): CfnWebACL.VisibilityConfigProperty => ({
      cloudWatchMetricsEnabled: true,
      sampledRequestsEnabled: true,
      metricName: `${metricPrefix}-${name}`,
    });
    const managed = (name: string, priority: number): CfnWebACL.RuleProperty => ({
      name,
      priority,
      overrideAction: { none: {} },
      statement: { managedRuleGroupStatement: { vendorName: 'AWS', name } },
      visibilityConfig: visibility(name),
    });
    const { perApiKey, perIp } = config.firewall;
    const exempt = anyOf(exemptFromIpLimit.map((route) => routeMatch(route, STAGE_NAME)));

    this.webAcl = new CfnWebACL(this, 'WebAcl', {
      scope: 'REGIONAL',
      defaultAction: { allow: {} },
      visibilityConfig: visibility('api'),
      rules: [
        managed('AWSManagedRulesAmazonIpReputationList', 0),
        managed('AWSManagedRulesKnownBadInputsRuleSet', 1),
        {
          name: 'RatePerApiKey',
          priority: 2,
          action: ruleAction(perApiKey.action),
          statement: {
            rateBasedStatement: {
              limit: perApiKey.limitPer5Minutes,
              // One bucket per Authorization header value (the API key). WAF does not count a request that has no
              // such header: the per-IP rule covers those.
              aggregateKeyType: 'CUSTOM_KEYS',
              customKeys: [{ header: { name: 'authorization', textTransformations: [{ priority: 0, type: 'NONE' }] } }],
            },
          },
          visibilityConfig: visibility('rate-per-api-key'),
        },
        {
          name: 'RatePerIp',
          priority: 3,
          action: ruleAction(perIp.action),
          statement: {
            rateBasedStatement: {
              limit: perIp.limitPer5Minutes,
              aggregateKeyType: 'IP',
              ...(exempt ? { scopeDownStatement: { notStatement: { statement: exempt } } } : {}),
            },
          },
          visibilityConfig: visibility('rate-per-ip'),
        },
      ],
    });
    new CfnWebACLAssociation(this, 'Association', {
      resourceArn: stage.stageArn,
      webAclArn: this.webAcl.attrArn,
    });
  }
}

function ruleAction(action: FirewallAction): CfnWebACL.RuleActionProperty {
  return action === 'count' ? { count: {} } : { block: {} };
}

/**
 * Exactly one route: its method, and its path as WAF sees it (the stage's name as a literal rather than the stage's
 * token, so the template shows the path itself), which is the path the client sent. Through the
 * execute-api URL that starts with the stage (`/v1/webhooks/processor`); through a custom domain mapped at its root,
 * it does not. Any other path (a longer one, another route that merely contains it) is rate limited as usual.
 */
function routeMatch(route: ExemptRoute, stageName: string): Statement {
  const exactly = (field: CfnWebACL.FieldToMatchProperty, value: string): Statement => ({
    byteMatchStatement: {
      fieldToMatch: field,
      positionalConstraint: 'EXACTLY',
      searchString: value,
      textTransformations: [{ priority: 0, type: 'NONE' }],
    },
  });
  return {
    andStatement: {
      statements: [
        exactly({ method: {} }, route.method),
        anyOf([exactly({ uriPath: {} }, `/${stageName}${route.path}`), exactly({ uriPath: {} }, route.path)])!,
      ],
    },
  };
}

/** WAF's orStatement needs at least two statements. */
function anyOf(statements: Statement[]): Statement | undefined {
  if (statements.length <= 1) return statements[0];
  return { orStatement: { statements } };
}
