import { App, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Key } from 'aws-cdk-lib/aws-kms';
import { IdempotencyTable } from 'keystone-idempotency/cdk';
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
});
