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
  /**
   * Epoch seconds: DynamoDB's TTL attribute. Reads treat a record past it as absent, since deletion lags. Absent
   * while a recoverable operation is unfinished (in the recovery index), so that TTL never deletes one.
   */
  expiresAt: 'expiresAt',
  downstreamKey: 'downstreamKey',
  response: 'response',
  attempt: 'attempt',
  createdAt: 'createdAt',
  completedAt: 'completedAt',
  /**
   * A multi-step operation's steps (recovery points), as the JSON of `StepProgress.steps`: a string, so that any
   * step result comes back exactly as stored (a number, an empty string and a nested null alike).
   */
  steps: 'steps',
  /** The progress's revision (one more with each checkpoint): the condition a checkpoint follows. */
  stepRevision: 'stepRevision',
  /** Recovery index partition key: present only while a recoverable operation is unfinished. */
  recoveryShard: 'recoveryShard',
  /** Recovery index sort key (epoch ms): when recovery may take the operation over. */
  recoverAt: 'recoverAt',
} as const;

export const KEY_ATTRIBUTE = RecordAttribute.key;
export const TTL_ATTRIBUTE = RecordAttribute.expiresAt;

/**
 * The sparse index of unfinished recoverable operations: only records carrying both recovery attributes appear in
 * it, so recovery reads the few unfinished operations, never the table. Keys only: recovery re-reads each record
 * strongly consistently before acting, since an index is eventually consistent.
 */
export const RECOVERY_INDEX = 'recovery';

/**
 * The index's partition key spreads records over this many shards, so that a busy table's claims and commits
 * (each one a write to the index) never concentrate on one index partition. Recovery queries every shard.
 * Changing it strands records in shards beyond the new count until they expire: only ever raise it together with
 * a recovery that still reads the old shards.
 */
export const RECOVERY_SHARDS = 8;
