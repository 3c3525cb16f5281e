import { RemovalPolicy, Stack, type StackProps, Validations } from 'aws-cdk-lib';
import { CfnAccount } from 'aws-cdk-lib/aws-apigateway';
import { ManagedPolicy, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import type { Construct } from 'constructs';

/**
 * CloudFormation stack name of {@link ApiGatewayAccountStack}. Stack names are unique per account and region, so
 * every environment deployed to one account and region shares the one stack of that name.
 */
export const API_GATEWAY_ACCOUNT_STACK_NAME = 'Keystone-apigateway-account';

/**
 * API Gateway's execution logging role, an account-wide (and region-wide) setting, in a stack of its own.
 *
 * When each environment's stack set it (RestApi's `cloudWatchRole`), every deploy replaced the account's role with
 * its own, and each stack left a retained role behind when deleted. Here one stack per account and region owns it;
 * the environments' stacks depend on it (or, with `apiGatewayLoggingRole: 'existing'`, on a role set up elsewhere).
 */
export class ApiGatewayAccountStack extends Stack {
  readonly role: Role;

  constructor(scope: Construct, id: string, props: StackProps = {}) {
    super(scope, id, {
      stackName: API_GATEWAY_ACCOUNT_STACK_NAME,
      description: "API Gateway's account-wide CloudWatch logging role (shared by every Keystone environment here)",
      ...props,
    });
    this.role = new Role(this, 'CloudWatchRole', {
      assumedBy: new ServicePrincipal('apigateway.amazonaws.com'),
      description: 'API Gateway writes execution logs of every REST API in this account and region through this role',
      managedPolicies: [ManagedPolicy.fromAwsManagedPolicyName('service-role/AmazonAPIGatewayPushToCloudWatchLogs')],
    });
    const account = new CfnAccount(this, 'Account', { cloudWatchRoleArn: this.role.roleArn });
    // Other APIs in the account may log through this role: deleting the stack must not take it away from them.
    this.role.applyRemovalPolicy(RemovalPolicy.RETAIN);
    account.applyRemovalPolicy(RemovalPolicy.RETAIN);
    Validations.of(this.role).acknowledge({
      id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]',
      reason:
        "API Gateway's account-wide logging role writes execution logs for every REST API in the account and " +
        'region, to log groups API Gateway names and creates itself; this AWS managed policy is the one AWS ' +
        'documents for that role and keeps current.',
    });
  }
}
