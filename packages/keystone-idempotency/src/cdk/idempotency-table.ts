import { RemovalPolicy } from 'aws-cdk-lib';
import {
  AttributeType,
  BillingMode,
  ProjectionType,
  Table,
  TableEncryption,
  type TableProps,
} from 'aws-cdk-lib/aws-dynamodb';
import { Grant, type IGrantable } from 'aws-cdk-lib/aws-iam';
import type { Construct } from 'constructs';
// The plain definition only: importing the store's entry point would load the AWS SDK into a CDK app.
import { IDEMPOTENCY_TABLE, IDEMPOTENCY_TABLE_ACTIONS } from '../dynamodb/table.js';
import { checkQueueWindow, type QueueWindow, type QueueWindowOptions } from './queue-window.js';

const ATTRIBUTE_TYPES = { S: AttributeType.STRING, N: AttributeType.NUMBER } as const;

export interface IdempotencyTableProps
  extends Omit<TableProps, 'partitionKey' | 'sortKey' | 'timeToLiveAttribute' | 'pointInTimeRecovery'> {
  /** The sparse recovery index, for `recoverable` operations and `recoverDue`. Default true. */
  readonly recoveryIndex?: boolean;
}

/**
 * The DynamoDB store's table, as a CDK construct: the key, TTL and recovery index it needs (`IDEMPOTENCY_TABLE`),
 * on demand, with point-in-time recovery, encryption with an AWS-managed key and `RemovalPolicy.RETAIN` unless the
 * props say otherwise (any other `TableProps` passes through). It is a `Table`, so everything a `Table` offers
 * works; its own grants give a function exactly the actions the engine uses, on exactly the resources it uses them
 * on (`IDEMPOTENCY_TABLE_ACTIONS`).
 *
 * A consumer of an SQS queue must remember its keys for as long as the queue can deliver a message again: check it
 * with {@link IdempotencyTable.checkQueueWindow} for each queue, which refuses a TTL shorter than the queue's
 * visibility timeout x maxReceiveCount and warns about one shorter than its dead-letter queue's retention period.
 *
 * `Table` (AWS::DynamoDB::Table) rather than `TableV2`: one region, and cdk-nag's point-in-time recovery rule reads
 * AWS::DynamoDB::Table only.
 *
 * @example
 * const idempotency = new IdempotencyTable(this, 'Idempotency');
 * idempotency.grantOperations(createOrder);      // every adapter and makeIdempotent
 * idempotency.grantRecovery(completer);          // recoverDue
 * createOrder.addEnvironment('IDEMPOTENCY_TABLE', idempotency.tableName);
 * idempotency.checkQueueWindow({ queue: ordersQueue, ttl: Duration.days(4) }); // the store's ttlSeconds
 */
export class IdempotencyTable extends Table {
  /** Whether the table has the recovery index (and `grantRecovery` can be used). */
  readonly hasRecoveryIndex: boolean;

  constructor(scope: Construct, id: string, props: IdempotencyTableProps = {}) {
    const { recoveryIndex = true, ...tableProps } = props;
    const { partitionKey, ttlAttribute } = IDEMPOTENCY_TABLE;
    super(scope, id, {
      billingMode: BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      encryption: TableEncryption.AWS_MANAGED,
      removalPolicy: RemovalPolicy.RETAIN,
      ...tableProps,
      partitionKey: { name: partitionKey.name, type: ATTRIBUTE_TYPES[partitionKey.type] },
      timeToLiveAttribute: ttlAttribute,
    });
    this.hasRecoveryIndex = recoveryIndex;
    if (recoveryIndex) {
      const index = IDEMPOTENCY_TABLE.recoveryIndex;
      this.addGlobalSecondaryIndex({
        indexName: index.name,
        partitionKey: { name: index.partitionKey.name, type: ATTRIBUTE_TYPES[index.partitionKey.type] },
        sortKey: { name: index.sortKey.name, type: ATTRIBUTE_TYPES[index.sortKey.type] },
        projectionType: ProjectionType.KEYS_ONLY,
      });
    }
  }

  /**
   * What a function that runs idempotent operations needs (every adapter, `makeIdempotent`, `claimAndCommit`):
   * GetItem, PutItem and UpdateItem on the table, and nothing on its index. Writes the function stages into a
   * commit go to your own tables: grant those there (IAM checks each action inside a transaction).
   */
  grantOperations(grantee: IGrantable): Grant {
    return this.grantOnTable(grantee, IDEMPOTENCY_TABLE_ACTIONS.operations);
  }

  /**
   * What recovery needs (`recoverDue`: `findDue`, `resume`, then commit or abandon): GetItem and UpdateItem on the
   * table, and Query on the recovery index only, never on the table.
   */
  grantRecovery(grantee: IGrantable): Grant {
    if (!this.hasRecoveryIndex) {
      throw new Error(`${this.node.path} has no recovery index (recoveryIndex: false): recovery needs it`);
    }
    const onTable = this.grantOnTable(grantee, IDEMPOTENCY_TABLE_ACTIONS.recovery);
    const onIndex = Grant.addToPrincipal({
      grantee,
      actions: [...IDEMPOTENCY_TABLE_ACTIONS.recoveryIndex],
      resourceArns: [`${this.tableArn}/index/${IDEMPOTENCY_TABLE.recoveryIndex.name}`],
    });
    return onTable.combine(onIndex);
  }

  /**
   * Checks the TTL of a store on this table against the time `queue` can deliver the same message again: throws
   * when SQS itself can redeliver it after its key expired (visibility timeout x maxReceiveCount, or the retention
   * period without a redrive policy), warns when a redrive from its dead-letter queue could. See
   * {@link checkQueueWindow}.
   */
  checkQueueWindow(options: QueueWindowOptions): QueueWindow | undefined {
    return checkQueueWindow(this, options);
  }

  private grantOnTable(grantee: IGrantable, actions: readonly string[]): Grant {
    // A customer-managed key must let the function read and write what the table encrypts with it.
    this.encryptionKey?.grantEncryptDecrypt(grantee);
    return Grant.addToPrincipal({ grantee, actions: [...actions], resourceArns: [this.tableArn] });
  }
}
