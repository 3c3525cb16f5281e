/**
 * The service's tables on PostgreSQL, and what a database role may do to them: plain data, shared by the CDK stack
 * (which declares each function's role and passes the list to the migration function), the migration function
 * (which creates the roles and grants exactly this) and the local stack (which does the same for the bundles it runs).
 * No CDK, no driver imports.
 */

/**
 * The tables a function can be granted: the engine's keys table (keystone-idempotency's migration), the service's
 * payments and API keys (lib/payments/postgres.ts) and its orders, reservations and stock (lib/orders/postgres.ts), all
 * in one schema.
 */
export const SQL_TABLES = ['idempotency_keys', 'payments', 'api_keys', 'orders', 'reservations', 'inventory'] as const;
export type SqlTable = (typeof SQL_TABLES)[number];

/**
 * The privileges a role can be granted on a table. TRUNCATE, REFERENCES and TRIGGER are deliberately not here, nor
 * any privilege on the schema beyond USAGE: nothing the service runs needs them.
 */
export const SQL_PRIVILEGES = ['SELECT', 'INSERT', 'UPDATE', 'DELETE'] as const;
export type SqlPrivilege = (typeof SQL_PRIVILEGES)[number];

/** One table a function's role touches, and the only privileges it has on it. */
export interface SqlAccess {
  readonly table: SqlTable;
  readonly privileges: readonly SqlPrivilege[];
}

/** A function's own database role, as the migration function creates it. */
export interface DatabaseRole {
  /** The role's name: the function's database user (`DATABASE_USER`). */
  readonly name: string;
  readonly grants: readonly SqlAccess[];
}

/** The database (in the Aurora cluster) that holds the service's schema. */
export const DATABASE_NAME = 'keystone';

/** The schema holding the keys table, its functions and the service's tables. */
export const DATABASE_SCHEMA = 'keystone';

/**
 * A function's database user, from its construct id: `PaymentsCreate` → `keystone_payments_create`. The prefix keeps
 * the service's roles apart from the cluster's own (`rds_*`, the admin user).
 */
export function databaseUserName(functionId: string): string {
  return `keystone_${functionId.replace(/(?<=[a-z0-9])(?=[A-Z])/g, '_').toLowerCase()}`;
}
