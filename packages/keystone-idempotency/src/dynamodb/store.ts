import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { DriverStore } from '../engine/driver-store.js';
import { ConfigurationError } from '../engine/errors.js';
import { type StoreLifetimeOptions, storeTimings } from '../engine/ownership.js';
import { DynamoDbDriver } from './driver.js';
import type { EffectItem } from './effect-item.js';

export type { EffectItem } from './effect-item.js';

export interface DynamoDbStoreOptions extends StoreLifetimeOptions {
  readonly client: DynamoDBDocumentClient;
  readonly tableName: string;
  /** Largest stored response (body plus headers, bytes). DynamoDB items are capped at 400 KB. */
  readonly maxResponseBytes?: number;
  /**
   * Largest progress of a multi-step operation (its steps and their results, as JSON, bytes). It shares the 400 KB
   * item with the response: a commit whose response would not fit beside the progress is refused. Default 64 KiB.
   */
  readonly maxCheckpointBytes?: number;
}

/** A multi-step operation's progress, unless configured otherwise. */
export const DEFAULT_MAX_CHECKPOINT_BYTES = 64 * 1024;

/** 400 KB item limit, less room for the record's own attributes. */
export const DEFAULT_MAX_RESPONSE_BYTES = 380 * 1024;
/** TransactWriteItems takes 100 actions; the key's completion (or a step's checkpoint) is one of them. */
export const MAX_TRANSACTION_EFFECTS = 99;

/**
 * The idempotency engine's store on DynamoDB: claim a key, commit the work with it, or release it.
 *
 * Lifecycle of one record, and what fences each step:
 *
 * ```
 *  claim (conditional put)        commit (conditional update, or       ┌─ replay: one GetItem-free round trip
 *  absent|expired ──► IN_PROGRESS ─────────────────────────► COMPLETED ┤    (the failed put returns ALL_OLD)
 *                       │   ▲     one transaction with the effects):   └─ different body: mismatch
 *                       │   │     leaseToken = mine, status = IN_PROGRESS
 *            release    │   │ takeover (conditional update on the old leaseToken):
 *  leaseToken = mine    ▼   │ lease ran out, or released; same fingerprint, same downstreamKey
 *                     RELEASED
 * ```
 *
 * Every write that changes ownership names the lease token it expects, so an owner whose lease was taken over can
 * neither commit (its effects are in the same transaction and are not written) nor release the new owner's claim.
 *
 * The protocol is the engine's (`DriverStore`, the same on every store); what is DynamoDB's here is each write's
 * condition expression, the item codec and the transaction. A fresh claim costs one conditional PutItem, and a
 * duplicate learns the existing record from that same failed put, so a replay is one request too. A commit with
 * effects is one TransactWriteItems whose ClientRequestToken is the lease token; without, one conditional UpdateItem.
 *
 * @example
 * const store = new DynamoDbStore({ client, tableName: 'idempotency' });
 * const outcome = await store.claim(scopedKey(scope), fingerprint(request));
 * if (outcome.kind === 'acquired') {
 *   const charge = await processor.charge(body, { idempotencyKey: outcome.lease.downstreamKey });
 *   await store.commit(outcome.lease, response(charge), [{ Put: { TableName: 'payments', Item: row(charge) } }]);
 * }
 */
export class DynamoDbStore extends DriverStore<EffectItem> {
  readonly tableName: string;

  constructor(options: DynamoDbStoreOptions) {
    // The lease and TTL are refused before the table's options, as they always were.
    storeTimings(options);
    if (!options.tableName) throw new ConfigurationError('tableName is required');
    super(
      new DynamoDbDriver(
        options.client,
        options.tableName,
        options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
        MAX_TRANSACTION_EFFECTS,
        options.maxCheckpointBytes ?? DEFAULT_MAX_CHECKPOINT_BYTES,
      ),
      options,
    );
    this.tableName = options.tableName;
  }
}
