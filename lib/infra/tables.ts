import { AttributeType, BillingMode, ProjectionType, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
import { IdempotencyTable } from 'keystone-idempotency/cdk';
import { idempotencyTable, type TableDefinition, tableDefinitions } from '../tables/definitions';
import type { EnvironmentConfig } from './environments';

const ATTRIBUTE_TYPES = { S: AttributeType.STRING, N: AttributeType.NUMBER } as const;

/**
 * The service's DynamoDB tables. The idempotency table is the library's own construct (`keystone-idempotency/cdk`),
 * exactly as a team using the package builds it; the service's other tables are built from their definitions, which
 * the local stack and the tests create tables from too.
 *
 * `Table` (AWS::DynamoDB::Table) rather than `TableV2` (a global table): the service runs in one region, and
 * cdk-nag's point-in-time-recovery rule inspects AWS::DynamoDB::Table only.
 */
export class DataTables extends Construct {
  /** The engine's table, with the grants its functions get. */
  readonly idempotency: IdempotencyTable;
  private readonly tables = new Map<string, Table>();

  constructor(scope: Construct, id: string, config: EnvironmentConfig) {
    super(scope, id);
    // The same construct id as every other table: the logical id (and so the deployed table) stays what it was.
    this.idempotency = new IdempotencyTable(this, idempotencyTable.id, {
      encryption: TableEncryption.AWS_MANAGED,
      deletionProtection: config.deletionProtection,
      removalPolicy: config.removalPolicy,
    });
    this.tables.set(idempotencyTable.id, this.idempotency);
    for (const definition of tableDefinitions) {
      if (definition.id !== idempotencyTable.id) this.tables.set(definition.id, this.build(definition, config));
    }
  }

  /** The table built from a definition. */
  get(definition: TableDefinition): Table {
    const table = this.tables.get(definition.id);
    if (!table) throw new Error(`No table for definition '${definition.id}'`);
    return table;
  }

  private build(definition: TableDefinition, config: EnvironmentConfig): Table {
    const { partitionKey, sortKey } = definition;
    const table = new Table(this, definition.id, {
      partitionKey: { name: partitionKey.name, type: ATTRIBUTE_TYPES[partitionKey.type] },
      sortKey: sortKey ? { name: sortKey.name, type: ATTRIBUTE_TYPES[sortKey.type] } : undefined,
      billingMode: BillingMode.PAY_PER_REQUEST,
      timeToLiveAttribute: definition.ttlAttribute,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      encryption: TableEncryption.AWS_MANAGED,
      deletionProtection: config.deletionProtection,
      removalPolicy: config.removalPolicy,
    });
    for (const index of definition.indexes ?? []) {
      table.addGlobalSecondaryIndex({
        indexName: index.name,
        partitionKey: { name: index.partitionKey.name, type: ATTRIBUTE_TYPES[index.partitionKey.type] },
        sortKey: index.sortKey ? { name: index.sortKey.name, type: ATTRIBUTE_TYPES[index.sortKey.type] } : undefined,
        projectionType: ProjectionType.KEYS_ONLY,
      });
    }
    return table;
  }
}
