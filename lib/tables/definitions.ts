import { KEY_ATTRIBUTE, TTL_ATTRIBUTE } from '../engine/layout';

/**
 * The tables, described once. The CDK stack builds them from these definitions and the local stack and tests create
 * them from the same ones, so local and deployed tables cannot drift. Plain data: no CDK, no SDK imports.
 */
export interface TableDefinition {
  /** Logical name: CDK construct id, and the suffix of local table names. */
  readonly id: string;
  /** Environment variable through which functions learn the physical table name. */
  readonly envVar: string;
  readonly partitionKey: { readonly name: string; readonly type: 'S' };
  readonly sortKey?: { readonly name: string; readonly type: 'S' };
  readonly ttlAttribute?: string;
}

/** The engine's key store: one item per scoped idempotency key. */
export const idempotencyTable: TableDefinition = {
  id: 'Idempotency',
  envVar: 'IDEMPOTENCY_TABLE',
  partitionKey: { name: KEY_ATTRIBUTE, type: 'S' },
  ttlAttribute: TTL_ATTRIBUTE,
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
