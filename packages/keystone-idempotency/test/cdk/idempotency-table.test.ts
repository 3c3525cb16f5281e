import { App, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Key } from 'aws-cdk-lib/aws-kms';
import { Queue } from 'aws-cdk-lib/aws-sqs';
import { checkQueueWindow, IdempotencyTable } from 'keystone-idempotency/cdk';
import { IDEMPOTENCY_TABLE_ACTIONS, idempotencyTableResource } from 'keystone-idempotency/dynamodb';

/** A stack with the table and two roles: one that runs operations, one that runs recovery. */
function synth(props: ConstructorParameters<typeof IdempotencyTable>[2] = {}) {
  const stack = new Stack(new App(), 'Consumer');
  const table = new IdempotencyTable(stack, 'Idempotency', props);
  const role = (id: string) => new Role(stack, id, { assumedBy: new ServicePrincipal('lambda.amazonaws.com') });
  const operations = role('Operations');
  const recovery = role('Recovery');
  table.grantOperations(operations);
  if (table.hasRecoveryIndex) table.grantRecovery(recovery);
  return { stack, table, template: Template.fromStack(stack), operations, recovery };
}

/** The statements of the policy attached to one role. */
function statementsOf(stack: Stack, template: Template, role: Role): unknown[] {
  const roleId = stack.getLogicalId(role.node.defaultChild as never);
  return Object.values(template.findResources('AWS::IAM::Policy'))
    .filter((policy) => JSON.stringify(policy.Properties.Roles) === JSON.stringify([{ Ref: roleId }]))
    .flatMap((policy) => policy.Properties.PolicyDocument.Statement as unknown[]);
}

describe('IdempotencyTable', () => {
  it('synthesizes the table the plain CloudFormation definition describes: one definition, two forms', () => {
    const { template } = synth();
    const tables = Object.values(template.findResources('AWS::DynamoDB::Table'));
    expect(tables).toHaveLength(1);
    expect(tables[0]).toEqual(idempotencyTableResource());
  });

  it('expires records on the TTL attribute, keeps point-in-time recovery, and retains the data by default', () => {
    const { template } = synth();
    template.hasResource('AWS::DynamoDB::Table', {
      DeletionPolicy: 'Retain',
      Properties: Match.objectLike({
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
        TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
        GlobalSecondaryIndexes: [
          {
            IndexName: 'recovery',
            KeySchema: [
              { AttributeName: 'recoveryShard', KeyType: 'HASH' },
              { AttributeName: 'recoverAt', KeyType: 'RANGE' },
            ],
            Projection: { ProjectionType: 'KEYS_ONLY' },
          },
        ],
      }),
    });
  });

  it('grants a function that runs operations GetItem, PutItem and UpdateItem on the table, and nothing else', () => {
    const { stack, table, template, operations } = synth();
    expect(statementsOf(stack, template, operations)).toEqual([
      {
        Effect: 'Allow',
        Action: [...IDEMPOTENCY_TABLE_ACTIONS.operations],
        Resource: stack.resolve(table.tableArn),
      },
    ]);
  });

  it('grants recovery GetItem and UpdateItem on the table, and Query on the recovery index only', () => {
    const { stack, table, template, recovery } = synth();
    expect(statementsOf(stack, template, recovery)).toEqual([
      { Effect: 'Allow', Action: ['dynamodb:GetItem', 'dynamodb:UpdateItem'], Resource: stack.resolve(table.tableArn) },
      {
        Effect: 'Allow',
        Action: 'dynamodb:Query',
        Resource: stack.resolve(`${table.tableArn}/index/recovery`),
      },
    ]);
  });

  it('takes any other Table prop, and leaves the recovery index out when asked (refusing recovery grants then)', () => {
    const { template, table } = synth({ recoveryIndex: false, removalPolicy: RemovalPolicy.DESTROY, tableName: 'x' });
    template.hasResource('AWS::DynamoDB::Table', {
      DeletionPolicy: 'Delete',
      Properties: Match.objectLike({ TableName: 'x', GlobalSecondaryIndexes: Match.absent() }),
    });
    expect(() =>
      table.grantRecovery(new Role(table, 'R', { assumedBy: new ServicePrincipal('lambda.amazonaws.com') })),
    ).toThrow(/no recovery index/);
    expect(Object.values(template.findResources('AWS::DynamoDB::Table'))[0]).toEqual({
      ...idempotencyTableResource({ recoveryIndex: false, tableName: 'x' }),
      DeletionPolicy: 'Delete',
      UpdateReplacePolicy: 'Delete',
    });
  });

  it('lets a granted function use a customer-managed key the table is encrypted with', () => {
    const stack = new Stack(new App(), 'Keyed');
    const key = new Key(stack, 'Key');
    const table = new IdempotencyTable(stack, 'Idempotency', {
      encryption: TableEncryption.CUSTOMER_MANAGED,
      encryptionKey: key,
    });
    const role = new Role(stack, 'Fn', { assumedBy: new ServicePrincipal('lambda.amazonaws.com') });
    table.grantOperations(role);
    const statements = JSON.stringify(statementsOf(stack, Template.fromStack(stack), role));
    expect(statements).toContain('kms:Decrypt');
    expect(statements).toContain('kms:GenerateDataKey*');
  });

  describe('checkQueueWindow', () => {
    /** A table and an orders queue: visibility 5 minutes, to the DLQ after 5 receives (25 minutes). */
    function withQueue(deadLetterRetention = Duration.days(1)) {
      const stack = new Stack(new App(), 'Consumer');
      const table = new IdempotencyTable(stack, 'Idempotency');
      const deadLetters = new Queue(stack, 'OrdersDlq', { retentionPeriod: deadLetterRetention });
      const queue = new Queue(stack, 'Orders', {
        visibilityTimeout: Duration.minutes(5),
        deadLetterQueue: { queue: deadLetters, maxReceiveCount: 5 },
      });
      const warnings = () => Annotations.fromStack(stack).findWarning('*', Match.anyValue());
      return { stack, table, queue, warnings };
    }

    it('refuses a TTL shorter than the visibility timeout x maxReceiveCount: SQS could redeliver past it', () => {
      const { table, queue } = withQueue();
      expect(() => table.checkQueueWindow({ queue, ttl: Duration.minutes(20) })).toThrow(
        /TTL \(1200s\) is shorter than the 1500s in which Consumer\/Orders can deliver the same message again \(visibility timeout 300s x maxReceiveCount 5\)/,
      );
    });

    it('accepts a TTL that covers the redelivery window and the DLQ’s retention, without a warning', () => {
      const { table, queue, warnings } = withQueue(Duration.hours(12));
      expect(table.checkQueueWindow({ queue, ttl: Duration.hours(12) })).toEqual({
        redeliverySeconds: 1500,
        redriveSeconds: 12 * 3600,
      });
      expect(warnings()).toEqual([]);
    });

    it('warns, without refusing, when a redrive from the DLQ could bring a message back after its key expired', () => {
      const { table, queue, warnings } = withQueue(Duration.days(14));
      table.checkQueueWindow({ queue }); // the stores' default TTL: 24 hours
      expect(warnings()).toEqual([
        expect.objectContaining({
          entry: expect.objectContaining({
            data: expect.stringMatching(
              /TTL \(86400s\) is shorter than the retention period \(1209600s\) of Consumer\/OrdersDlq.*ttlShorterThanDeadLetterRetention/,
            ),
          }),
        }),
      ]);
    });

    it('refuses, without a redrive policy, a TTL shorter than the queue’s retention: it redelivers until then', () => {
      const stack = new Stack(new App(), 'Consumer');
      const queue = new Queue(stack, 'Orders'); // SQS's defaults: 30 s visibility, 4 days' retention, no DLQ
      expect(() => checkQueueWindow(stack, { queue, ttl: Duration.days(1) })).toThrow(
        /shorter than the 345600s .*\(its retention period: with no redrive policy/,
      );
      expect(checkQueueWindow(stack, { queue, ttl: Duration.days(4) })).toEqual({ redeliverySeconds: 345600 });
    });

    it('warns that it cannot check an imported queue', () => {
      const stack = new Stack(new App(), 'Consumer');
      const queue = Queue.fromQueueArn(stack, 'Orders', 'arn:aws:sqs:eu-west-1:123456789012:orders');
      expect(checkQueueWindow(stack, { queue })).toBeUndefined();
      expect(Annotations.fromStack(stack).findWarning('*', Match.stringLikeRegexp('queueWindowUnknown'))).toHaveLength(
        1,
      );
    });
  });
});
