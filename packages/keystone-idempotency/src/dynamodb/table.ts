import type { CreateTableCommandInput, UpdateTimeToLiveCommandInput } from '@aws-sdk/client-dynamodb';
import { KEY_ATTRIBUTE, RECOVERY_INDEX, RecordAttribute, TTL_ATTRIBUTE } from './layout.js';

/**
 * The table the DynamoDB store needs, as plain data: the one definition that the SDK requests, the CloudFormation
 * resource and the CDK construct (`keystone-idempotency/cdk`) below are all built from. Plain data and types only:
 * nothing here loads the AWS SDK.
 *
 * - a string partition key, `pk`: one item per scoped idempotency key (no sort key);
 * - TTL on `expiresAt` (epoch seconds): DynamoDB deletes expired records, eventually; the store treats a record past
 *   it as absent on every read, since that deletion lags;
 * - the sparse recovery index, `recovery` (partition key `recoveryShard`, string; sort key `recoverAt`, number; keys
 *   only): only unfinished recoverable operations carry its keys, so recovery queries a handful of items and never
 *   scans. Needed by `recoverable: true` and `recoverDue`; leave it out only if you use neither.
 */
export const IDEMPOTENCY_TABLE = {
  partitionKey: { name: KEY_ATTRIBUTE, type: 'S' },
  ttlAttribute: TTL_ATTRIBUTE,
  recoveryIndex: {
    name: RECOVERY_INDEX,
    partitionKey: { name: RecordAttribute.recoveryShard, type: 'S' },
    sortKey: { name: RecordAttribute.recoverAt, type: 'N' },
    projection: 'KEYS_ONLY',
  },
} as const;

/**
 * The IAM actions the store uses, by what a function does with it. There is no Scan, no DeleteItem and no Query on
 * the table itself; TransactWriteItems has no action of its own (IAM checks each put and update inside it).
 */
export const IDEMPOTENCY_TABLE_ACTIONS = {
  /**
   * Every adapter and `makeIdempotent`: claim (PutItem), take over, commit and release (UpdateItem), read a record
   * while waiting for an original (GetItem), and one-shot `claimAndCommit` (a PutItem in a transaction). On the
   * table's ARN.
   */
  operations: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
  /** Recovery (`recoverDue`): read and take over due operations, then commit or abandon them. On the table's ARN. */
  recovery: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
  /** Recovery finds due operations through the index alone. On `<table ARN>/index/recovery` only. */
  recoveryIndex: ['dynamodb:Query'],
} as const;

export interface IdempotencyTableOptions {
  /** The sparse recovery index, for `recoverable` operations and `recoverDue`. Default true. */
  readonly recoveryIndex?: boolean;
}

/**
 * The SDK requests that make the table: CreateTable (on demand), then, once the table is ACTIVE, UpdateTimeToLive
 * (DynamoDB takes TTL in a request of its own).
 *
 * @example
 * const { createTable, timeToLive } = idempotencyTableRequests('idempotency');
 * await client.send(new CreateTableCommand(createTable));
 * await waitUntilTableExists({ client, maxWaitTime: 60 }, { TableName: 'idempotency' });
 * await client.send(new UpdateTimeToLiveCommand(timeToLive));
 */
export function idempotencyTableRequests(
  tableName: string,
  options: IdempotencyTableOptions = {},
): { readonly createTable: CreateTableCommandInput; readonly timeToLive: UpdateTimeToLiveCommandInput } {
  const { partitionKey, recoveryIndex: index } = IDEMPOTENCY_TABLE;
  const withIndex = options.recoveryIndex ?? true;
  return {
    createTable: {
      TableName: tableName,
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [
        { AttributeName: partitionKey.name, AttributeType: partitionKey.type },
        ...(withIndex
          ? [
              { AttributeName: index.partitionKey.name, AttributeType: index.partitionKey.type },
              { AttributeName: index.sortKey.name, AttributeType: index.sortKey.type },
            ]
          : []),
      ],
      KeySchema: [{ AttributeName: partitionKey.name, KeyType: 'HASH' }],
      ...(withIndex ? { GlobalSecondaryIndexes: [recoveryIndexOf()] } : {}),
    },
    timeToLive: {
      TableName: tableName,
      TimeToLiveSpecification: { AttributeName: IDEMPOTENCY_TABLE.ttlAttribute, Enabled: true },
    },
  };
}

export interface IdempotencyTableResourceOptions extends IdempotencyTableOptions {
  /** A fixed physical name. Default: none, CloudFormation names it (and a replacement can then happen safely). */
  readonly tableName?: string;
}

/**
 * The table as a CloudFormation resource (`AWS::DynamoDB::Table`), for a template written by hand or with SAM:
 * on demand, TTL, point-in-time recovery, encryption at rest with an AWS-managed key, kept when the stack is
 * deleted or the resource replaced. The same properties the CDK construct synthesizes.
 *
 * @example
 * // template.json: { "Resources": { "IdempotencyTable": idempotencyTableResource() } }
 */
export function idempotencyTableResource(options: IdempotencyTableResourceOptions = {}) {
  const { createTable, timeToLive } = idempotencyTableRequests('', options);
  return {
    Type: 'AWS::DynamoDB::Table',
    DeletionPolicy: 'Retain',
    UpdateReplacePolicy: 'Retain',
    Properties: {
      ...(options.tableName ? { TableName: options.tableName } : {}),
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: createTable.AttributeDefinitions,
      KeySchema: createTable.KeySchema,
      ...(createTable.GlobalSecondaryIndexes ? { GlobalSecondaryIndexes: createTable.GlobalSecondaryIndexes } : {}),
      TimeToLiveSpecification: timeToLive.TimeToLiveSpecification,
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      SSESpecification: { SSEEnabled: true },
    },
  } as const;
}

function recoveryIndexOf() {
  const { recoveryIndex: index } = IDEMPOTENCY_TABLE;
  return {
    IndexName: index.name,
    KeySchema: [
      { AttributeName: index.partitionKey.name, KeyType: 'HASH' as const },
      { AttributeName: index.sortKey.name, KeyType: 'RANGE' as const },
    ],
    Projection: { ProjectionType: index.projection },
  };
}
