import { Match, Template } from 'aws-cdk-lib/assertions';
import { type SynthesizedApp, synthesize } from './synth';

let synthesized: SynthesizedApp;
beforeAll(() => {
  synthesized = synthesize({ bundle: false });
});
afterAll(() => synthesized?.dispose());

describe('ApprovalWorkflow', () => {
  it('deploys the refund approval as a durable function, with a timeout that outlasts its callback', () => {
    const template = Template.fromStack(synthesized.stacks.prod);
    const durable = template.findResources('AWS::Lambda::Function', {
      Properties: { DurableConfig: Match.anyValue() },
    });
    expect(Object.values(durable).map((fn) => fn.Properties.DurableConfig)).toEqual([
      { ExecutionTimeout: 84 * 3600, RetentionPeriodInDays: 14 },
    ]);
    const [fn] = Object.values(durable);
    expect(fn?.Properties.Environment.Variables.IDEMPOTENCY_TABLE).toBeDefined();
  });

  it("grants checkpoints on this stack's functions only, and no managed policy", () => {
    const template = Template.fromStack(synthesized.stacks.prod);
    const roles = template.findResources('AWS::IAM::Role', {
      Properties: { Description: Match.stringLikeRegexp('^ApprovalWorkflow') },
    });
    const [roleId] = Object.keys(roles);
    expect(roles[roleId ?? '']?.Properties.ManagedPolicyArns).toBeUndefined();
    const policies = template.findResources('AWS::IAM::Policy', {
      Properties: { Roles: [{ Ref: roleId }] },
    });
    const statements = Object.values(policies).flatMap((policy) => policy.Properties.PolicyDocument.Statement);
    const checkpoint = statements.find((s: { Action: unknown }) =>
      JSON.stringify(s.Action).includes('CheckpointDurableExecution'),
    );
    expect(checkpoint.Action).toEqual(['lambda:CheckpointDurableExecution', 'lambda:GetDurableExecutionState']);
    expect(JSON.stringify(checkpoint.Resource)).toContain(':function:Keystone-prod-*');
  });
});
