import { App, Stack, Validations } from 'aws-cdk-lib';
import { Queue } from 'aws-cdk-lib/aws-sqs';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { type SynthesizedApp, synthesize, TESTED_ENVIRONMENTS } from './synth';

/**
 * cdk-nag 3 is a CDK policy-validation plugin, not an aspect: `validateScope` runs the AWS Solutions pack over a
 * construct tree and returns what is neither compliant nor acknowledged (`Validations.of(x).acknowledge`), errors
 * and warnings alike. Rules read the template's shape only, so nothing is bundled here.
 */
let synthesized: SynthesizedApp;
beforeAll(() => {
  synthesized = synthesize({ bundle: false });
});
afterAll(() => synthesized?.dispose());

/** Every acknowledgement under a scope: rule id → the reasons given for it. */
function acknowledgements(scope: IConstruct): Map<string, Set<string>> {
  const found = new Map<string, Set<string>>();
  for (const construct of scope.node.findAll()) {
    for (const entry of construct.node.metadata) {
      if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
      for (const [id, reason] of Object.entries(entry.data as Record<string, string>)) {
        const rule = id.replace(/^annotation::/i, '');
        found.set(rule, (found.get(rule) ?? new Set()).add(reason));
      }
    }
  }
  return found;
}

describe('cdk-nag AWS Solutions checks', () => {
  it.each(TESTED_ENVIRONMENTS)('finds no unacknowledged error or warning in %s', (env) => {
    const report = new AwsSolutionsChecks().validateScope(synthesized.stacks[env]);
    const findings = report.violations.map(
      (violation) =>
        `${violation.severity} ${violation.ruleName} at ${violation.violatingResources.map((r) => r.constructPath)}`,
    );
    expect(findings).toEqual([]);
  });

  it('acknowledges only these findings, each with a reason of its own', () => {
    const prod = acknowledgements(synthesized.stacks.prod);
    // A new acknowledgement must show up here, in review, instead of slipping in.
    expect([...prod.keys()].sort()).toEqual([
      'AwsSolutions-APIG4',
      'AwsSolutions-COG4',
      'AwsSolutions-IAM5[Resource::*]',
      'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:function:Keystone-prod-*]',
      'AwsSolutions-L1',
      'AwsSolutions-SMG4',
    ]);
    // Without tracing, dev has no X-Ray grant to acknowledge.
    expect(acknowledgements(synthesized.stacks.dev).has('AwsSolutions-IAM5[Resource::*]')).toBe(false);
    const reasons = [...prod.values()].flatMap((set) => [...set]);
    for (const reason of reasons) expect(reason.length).toBeGreaterThan(80);
    // COG4 has two reasons (token routes, and the webhook's); no reason is copied onto another rule. (The logging
    // role's IAM4 lives in the API Gateway account stack, checked with it.)
    expect(new Set(reasons).size).toBe(6);
  });

  it('fails the synth of an app with an unacknowledged finding, as bin/app.ts registers it', () => {
    const app = new App({ builtinCloudFormationValidation: false });
    new Queue(new Stack(app, 'Careless'), 'NoDeadLetterQueue', { enforceSSL: true });
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    expect(() => app.synth()).toThrow(/AwsSolutions-SQS3/);
  });
});
