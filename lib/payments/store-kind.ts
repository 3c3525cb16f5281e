/**
 * Where the service keeps its data (the functions run unchanged on either; each is bundled for its store):
 * - `dynamodb`, the default: the idempotency and payments tables, on demand, nothing to run or patch;
 * - `postgres`: Aurora PostgreSQL Serverless v2 behind RDS Proxy, the keys and the service's tables in one database
 *   (a payment row commits in the same SQL transaction as its key), the functions in a VPC (lib/infra/database.ts).
 *
 * Plain data with no imports: the runtime (`STORE`, lib/payments/config.ts) and the stack (the `store` context,
 * lib/infra/environments.ts) both read it.
 */
export const STORE_KINDS = ['dynamodb', 'postgres'] as const;
export type StoreKind = (typeof STORE_KINDS)[number];
