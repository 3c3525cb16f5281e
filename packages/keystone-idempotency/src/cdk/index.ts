/**
 * CDK constructs for the engine's infrastructure: `IdempotencyTable`, the DynamoDB store's table with the grants a
 * function needs, and `checkQueueWindow`, a consumer's TTL checked against its queue's redelivery window. Needs `aws-cdk-lib` and `constructs` (optional peer dependencies); nothing here loads at runtime
 * in a function, and nothing here loads the AWS SDK.
 */
export { IdempotencyTable, type IdempotencyTableProps } from './idempotency-table.js';
export { checkQueueWindow, type QueueWindow, type QueueWindowOptions } from './queue-window.js';
