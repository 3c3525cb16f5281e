/**
 * CDK constructs for the engine's infrastructure: `IdempotencyTable`, the DynamoDB store's table with the grants a
 * function needs. Needs `aws-cdk-lib` and `constructs` (optional peer dependencies); nothing here loads at runtime
 * in a function, and nothing here loads the AWS SDK.
 */
export { IdempotencyTable, type IdempotencyTableProps } from './idempotency-table.js';
