import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { API_GATEWAY_ACCOUNT_STACK_NAME } from '../../lib/infra/api-gateway-account';
import { ENVIRONMENT_NAMES, type EnvironmentConfig, environments, withApiKind } from '../../lib/infra/environments';
import { addKeystoneStacks } from '../../lib/infra/keystone-app';
import { CDK_JSON_CONTEXT } from './synth';

function appWith(configs: readonly EnvironmentConfig[]) {
  const app = new App({
    builtinCloudFormationValidation: false,
    context: { ...CDK_JSON_CONTEXT, 'aws:cdk:bundling-stacks': [] },
  });
  return addKeystoneStacks(app, configs);
}

const all = ENVIRONMENT_NAMES.map((name) => environments[name]);

describe('addKeystoneStacks', () => {
  it('builds one logging-role stack for all environments in one account, and makes each depend on it', () => {
    const { environments: stacks, accounts } = appWith(all);
    expect(stacks.map((stack) => stack.stackName)).toEqual(['Keystone-dev', 'Keystone-staging', 'Keystone-prod']);
    expect(accounts.map((account) => account.stackName)).toEqual([API_GATEWAY_ACCOUNT_STACK_NAME]);
    for (const stack of stacks) expect(stack.dependencies).toEqual(accounts);
  });

  it('builds no logging-role stack for environments behind an HTTP API, which writes no execution logs', () => {
    const { environments: stacks, accounts } = appWith(withApiKind(all, 'http'));
    expect(accounts).toEqual([]);
    for (const stack of stacks) expect(stack.dependencies).toEqual([]);
  });

  it("never sets the account's logging role from an environment's stack", () => {
    const { environments: stacks } = appWith(all);
    for (const stack of stacks) {
      const template = Template.fromStack(stack);
      template.resourceCountIs('AWS::ApiGateway::Account', 0);
      const roles = JSON.stringify(template.findResources('AWS::IAM::Role'));
      expect(roles).not.toContain('apigateway.amazonaws.com');
      expect(roles).not.toContain('AmazonAPIGatewayPushToCloudWatchLogs');
    }
  });

  it('sets the role once, in the account stack, and keeps it when the stack is deleted', () => {
    const template = Template.fromStack(appWith([environments.prod]).accounts[0]!);
    template.resourceCountIs('AWS::ApiGateway::Account', 1);
    template.resourceCountIs('AWS::IAM::Role', 1);
    template.hasResource('AWS::IAM::Role', {
      DeletionPolicy: 'Retain',
      Properties: {
        AssumeRolePolicyDocument: {
          Statement: [
            { Action: 'sts:AssumeRole', Effect: 'Allow', Principal: { Service: 'apigateway.amazonaws.com' } },
          ],
          Version: '2012-10-17',
        },
      },
    });
    template.hasResource('AWS::ApiGateway::Account', { DeletionPolicy: 'Retain' });
  });

  it("builds no account stack for an environment whose account's role is managed elsewhere", () => {
    const { environments: stacks, accounts } = appWith([{ ...environments.prod, apiGatewayLoggingRole: 'existing' }]);
    expect(accounts).toEqual([]);
    expect(stacks[0]!.dependencies).toEqual([]);
  });

  it('builds one account stack per pinned account and region', () => {
    const { accounts } = appWith([
      { ...environments.dev, account: '111111111111', region: 'eu-west-1' },
      { ...environments.staging, account: '111111111111', region: 'eu-west-1' },
      { ...environments.prod, account: '222222222222', region: 'eu-west-1' },
    ]);
    expect(accounts.map((account) => [account.stackName, account.account, account.region])).toEqual([
      [API_GATEWAY_ACCOUNT_STACK_NAME, '111111111111', 'eu-west-1'],
      [API_GATEWAY_ACCOUNT_STACK_NAME, '222222222222', 'eu-west-1'],
    ]);
  });

  it('passes cdk-nag, its one acknowledgement given a reason', () => {
    const [account] = appWith([environments.dev]).accounts;
    expect(new AwsSolutionsChecks().validateScope(account!).violations).toEqual([]);
  });
});
