import type { Stage } from 'aws-cdk-lib/aws-apigateway';
import { CfnWebACL, CfnWebACLAssociation } from 'aws-cdk-lib/aws-wafv2';
import { Construct } from 'constructs';
import type { EnvironmentConfig } from './environments';

/**
 * A WAF web ACL in front of the API stage: AWS's IP reputation list, its known-bad-inputs rules, and a per-IP rate
 * limit. The common rule set is left out on purpose: its bot-ish rules (no User-Agent, large bodies) misfire on
 * machine-to-machine callers, which is all this API has.
 */
export class ApiFirewall extends Construct {
  readonly webAcl: CfnWebACL;

  constructor(scope: Construct, id: string, { stage, config }: { stage: Stage; config: EnvironmentConfig }) {
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

    this.webAcl = new CfnWebACL(this, 'WebAcl', {
      scope: 'REGIONAL',
      defaultAction: { allow: {} },
      visibilityConfig: visibility('api'),
      rules: [
        managed('AWSManagedRulesAmazonIpReputationList', 0),
        managed('AWSManagedRulesKnownBadInputsRuleSet', 1),
        {
          name: 'RatePerIp',
          priority: 2,
          action: { block: {} },
          statement: {
            rateBasedStatement: {
              limit: config.wafRateLimitPer5Minutes,
              aggregateKeyType: 'IP',
              // The processor delivers webhooks in bursts from a few addresses (a backlog replays all at once);
              // those requests are authenticated by signature and throttled by the stage, not by this rule.
              scopeDownStatement: {
                notStatement: {
                  statement: {
                    byteMatchStatement: {
                      fieldToMatch: { uriPath: {} },
                      positionalConstraint: 'CONTAINS',
                      searchString: '/webhooks/',
                      textTransformations: [{ priority: 0, type: 'NONE' }],
                    },
                  },
                },
              },
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
