/**
 * The idempotency record's attribute names: the one place the engine, the table definition and the CDK stack
 * agree on them. A table built for the engine needs only a string partition key and TTL on the expiry attribute.
 */
export const RecordAttribute = {
  /** Partition key: the scoped key (account, method and route, client key). */
  key: 'pk',
  status: 'status',
  fingerprint: 'fingerprint',
  leaseToken: 'leaseToken',
  /** Epoch milliseconds after which an IN_PROGRESS record's owner is presumed dead. */
  leaseExpiresAt: 'leaseExpiresAt',
  /** Epoch seconds: DynamoDB's TTL attribute. Reads treat a record past it as absent, since deletion lags. */
  expiresAt: 'expiresAt',
  downstreamKey: 'downstreamKey',
  response: 'response',
  attempt: 'attempt',
  createdAt: 'createdAt',
  completedAt: 'completedAt',
} as const;

export const KEY_ATTRIBUTE = RecordAttribute.key;
export const TTL_ATTRIBUTE = RecordAttribute.expiresAt;
