import { ArnFormat, Duration, Stack, Validations } from 'aws-cdk-lib';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import type { IdempotencyTable } from 'keystone-idempotency/cdk';
import type { EnvironmentConfig } from './environments';
import { ServiceFunction } from './service-function';

export interface ApprovalWorkflowProps {
  readonly config: EnvironmentConfig;
  readonly idempotency: IdempotencyTable;
}

/**
 * The refund approval as a Lambda durable function (functions/approval-workflow.ts): an execution lasts up to three
 * days and a half (its callback waits three), and Lambda keeps a closed execution's history, and with it the
 * dedupe of its name, for 14 days.
 */
export class ApprovalWorkflow extends Construct {
  readonly service: ServiceFunction;

  constructor(scope: Construct, id: string, { config, idempotency }: ApprovalWorkflowProps) {
    super(scope, id);
    this.service = new ServiceFunction(this, 'ApprovalWorkflow', {
      spec: {
        id: 'ApprovalWorkflow',
        entry: 'functions/approval-workflow.ts',
        description: 'Refund approval: a durable execution per Idempotency-Key',
        memoryMb: 256,
      },
      timeoutSeconds: 60,
      config,
      environment: { IDEMPOTENCY_TABLE: idempotency.tableName },
      durableConfig: { executionTimeout: Duration.hours(84), retentionPeriod: Duration.days(14) },
    });
    idempotency.grantOperations(this.service.role);
    // What AWSLambdaBasicDurableExecutionRolePolicy adds to basic execution, inline (no managed policy: cdk-nag IAM4):
    // the SDK checkpoints each step and reads the execution's state back on replay, through the function's own ARN.
    // The ARN is named by the stack's prefix, not taken from the function: the function depends on its role's
    // policy, so the policy can't depend on the function.
    // IAM's `*` spans `:` and `/`, so this covers the executions' ARNs too (`function:NAME:VERSION/durable-execution/...`).
    const { stackName } = Stack.of(this);
    const functions = Stack.of(this).formatArn({
      service: 'lambda',
      resource: 'function',
      resourceName: `${stackName}-*`,
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
    this.service.role.addToPrincipalPolicy(
      new PolicyStatement({
        actions: ['lambda:CheckpointDurableExecution', 'lambda:GetDurableExecutionState'],
        resources: [functions],
      }),
    );
    Validations.of(this.service.role).acknowledge({
      id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:function:${stackName}-*]`,
      reason:
        "The durable function checkpoints its own executions: its ARN can't be named in its role's policy (the " +
        'function depends on the policy), so the policy names the functions of this stack by their name prefix.',
    });
  }
}
