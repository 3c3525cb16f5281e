import { IDEMPOTENCY_TABLE } from 'keystone-idempotency/dynamodb';

/**
 * The tables, described once. The CDK stack builds them from these definitions and the local stack and tests create
 * them from the same ones, so local and deployed tables cannot drift. Plain data: no CDK, no SDK imports.
 */
export interface KeyDefinition {
  readonly name: string;
  readonly type: 'S' | 'N';
}

/** A global secondary index. Keys only: whoever reads it re-reads the item from the table. */
export interface IndexDefinition {
  readonly name: string;
  readonly partitionKey: KeyDefinition;
  readonly sortKey?: KeyDefinition;
  readonly projection: 'KEYS_ONLY';
}

export interface TableDefinition {
  /** Logical name: CDK construct id, and the suffix of local table names. */
  readonly id: string;
  /** Environment variable through which functions learn the physical table name. */
  readonly envVar: string;
  readonly partitionKey: KeyDefinition;
  readonly sortKey?: KeyDefinition;
  readonly ttlAttribute?: string;
  readonly indexes?: readonly IndexDefinition[];
}

/**
 * The engine's key store: one item per scoped idempotency key, and the sparse recovery index, in which only
 * unfinished recoverable operations appear (the engine's `findDue` queries it; nothing ever scans the table). Its
 * shape is the package's own definition (`IDEMPOTENCY_TABLE`), the one the CDK construct builds the deployed table
 * from: this adds only what the service names it by.
 */
export const idempotencyTable: TableDefinition = {
  id: 'Idempotency',
  envVar: 'IDEMPOTENCY_TABLE',
  partitionKey: IDEMPOTENCY_TABLE.partitionKey,
  ttlAttribute: IDEMPOTENCY_TABLE.ttlAttribute,
  indexes: [IDEMPOTENCY_TABLE.recoveryIndex],
};

/**
 * The payments service's data: payments (`ACCOUNT#<id>` / `PAYMENT#<id>`) and hashed API keys
 * (`APIKEY#<sha256>` / `APIKEY`).
 */
export const paymentsTable: TableDefinition = {
  id: 'Payments',
  envVar: 'PAYMENTS_TABLE',
  partitionKey: { name: 'pk', type: 'S' },
  sortKey: { name: 'sk', type: 'S' },
};

export const tableDefinitions: readonly TableDefinition[] = [idempotencyTable, paymentsTable];
