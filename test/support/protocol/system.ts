import { randomUUID } from 'node:crypto';
import { BatchGetCommand, DeleteCommand, type DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { ConfiguredRetryStrategy } from '@smithy/core/retry';
import { RECOVERY_SHARDS } from '../../../lib/dynamodb/layout';
import { recoveryShardOf } from '../../../lib/dynamodb/recovery-index';
import { DynamoDbStore, type EffectItem } from '../../../lib/dynamodb/store';
import type { Lease, StoredResponse } from '../../../lib/engine/record';
import { localClient, localDocumentClient } from '../dynamodb';
import { FakeClock } from '../fake-clock';
import type { Charge } from './outside-processor';
import { OutsideProcessor } from './outside-processor';

/**
 * How a call reaches DynamoDB:
 * - `direct`: as sent, as answered;
 * - `sdk-retry`: the reply to each request's first attempt is lost after DynamoDB applied it, and the SDK sends the
 *   same request again, as it does after a dropped connection;
 * - `reply-lost`: every reply is lost after DynamoDB applied the request, and the SDK gives up: the caller sees an
 *   error without knowing whether its write landed.
 */
export const Delivery = { direct: 'direct', sdkRetry: 'sdk-retry', replyLost: 'reply-lost' } as const;
export type Delivery = (typeof Delivery)[keyof typeof Delivery];

export interface ProtocolTables {
  readonly doc: DynamoDBDocumentClient;
  readonly idempotencyTable: string;
  readonly paymentsTable: string;
}

export interface ProtocolSystemOptions {
  readonly leaseSeconds: number;
  readonly ttlSeconds: number;
  /** Epoch ms. At or after the real now: DynamoDB Local's TTL sweeper deletes what is past in wall-clock time. */
  readonly startAt: number;
  readonly operations: number;
}

/** The real state after a step: the run's idempotency items (raw, in key order) and its effect rows. */
export interface Snapshot {
  readonly items: readonly (Record<string, unknown> | undefined)[];
  readonly rows: readonly EffectRow[];
}

/** The row an owner's commit writes with the completion: the witness, in our tables, that the work was recorded. */
export interface EffectRow {
  readonly sk: string;
  readonly downstreamKey: string;
  readonly leaseToken: string;
  readonly chargeId: string;
}

/**
 * The real system a protocol model runs against: the engine on DynamoDB Local with a controlled clock, the outside
 * processor, and clients that lose replies on demand. Each run has its own keys and effect partition, and deletes
 * what it wrote when done, so that runs sharing a table never see each other (the recovery index included).
 */
export class ProtocolSystem {
  readonly clock: FakeClock;
  readonly processor = new OutsideProcessor();
  readonly keys: readonly string[];
  /** The partition of the payments table this run's effect rows go to: one query reads them all. */
  readonly effectsPk: string;
  private readonly store: DynamoDbStore;
  /** The state last read, until a call may have changed it: steps that only move the clock or the processor skip the reads. */
  #snapshot: Snapshot | undefined;

  constructor(
    private readonly tables: ProtocolTables,
    private readonly options: ProtocolSystemOptions,
  ) {
    const run = randomUUID();
    this.clock = new FakeClock(options.startAt);
    this.keys = keysInDistinctShards(run, options.operations);
    this.effectsPk = `MODEL#${run}`;
    this.store = this.storeOn(tables.doc);
  }

  /** The recovery index shard of an operation's key, as a number. */
  shardOf(opIndex: number): number {
    return Number(recoveryShardOf(this.keys[opIndex]!));
  }

  /** Runs `use` with a store whose requests are delivered as `delivery` says. */
  async via<T>(delivery: Delivery, use: (store: DynamoDbStore) => Promise<T>): Promise<T> {
    this.#snapshot = undefined;
    if (delivery === Delivery.direct) return use(this.store);
    // A client per call: the SDK's retry quota is per client, and must not run dry over a long run.
    const client = localClient(
      delivery === Delivery.sdkRetry ? { retryStrategy: new ConfiguredRetryStrategy(2, 0) } : { maxAttempts: 1 },
    );
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const attempted = context as { replyLost?: boolean };
        if (delivery === Delivery.sdkRetry && attempted.replyLost) return next(args);
        attempted.replyLost = true;
        // The request reaches DynamoDB and is applied (or refused); only its answer is lost on the way back.
        await next(args).catch(() => undefined);
        throw Object.assign(new Error('reply lost'), { name: 'TimeoutError', $retryable: {} });
      },
      { step: 'deserialize', name: 'loseReply' },
    );
    try {
      return await use(this.storeOn(localDocumentClient(client)));
    } finally {
      client.destroy();
    }
  }

  /** The run's items and effect rows as they are now. */
  async snapshot(): Promise<Snapshot> {
    if (!this.#snapshot) {
      const [items, rows] = await Promise.all([this.records(), this.effectRows()]);
      this.#snapshot = { items, rows };
    }
    return this.#snapshot;
  }

  /** The raw items under the run's keys (strongly consistent), in key order; undefined where there is none. */
  async records(): Promise<(Record<string, unknown> | undefined)[]> {
    const { Responses } = await this.tables.doc.send(
      new BatchGetCommand({
        RequestItems: {
          [this.tables.idempotencyTable]: { Keys: this.keys.map((pk) => ({ pk })), ConsistentRead: true },
        },
      }),
    );
    const items = Responses?.[this.tables.idempotencyTable] ?? [];
    return this.keys.map((pk) => items.find((item) => item.pk === pk));
  }

  async effectRows(): Promise<EffectRow[]> {
    const rows: EffectRow[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.tables.doc.send(
        new QueryCommand({
          TableName: this.tables.paymentsTable,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': this.effectsPk },
          ConsistentRead: true,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      rows.push(...((page.Items ?? []) as unknown as EffectRow[]));
      start = page.LastEvaluatedKey;
    } while (start);
    return rows;
  }

  /**
   * What DynamoDB's TTL does, some time after an item's expiry: deletes it, unless it was written a later expiry
   * meanwhile. DynamoDB Local can't be told to sweep now, so the test deletes on its behalf, on the same condition.
   */
  async sweepExpired(): Promise<void> {
    const nowSeconds = Math.floor(this.clock.now() / 1000);
    this.#snapshot = undefined;
    for (const pk of this.keys) {
      await this.tables.doc
        .send(
          new DeleteCommand({
            TableName: this.tables.idempotencyTable,
            Key: { pk },
            ConditionExpression: 'expiresAt <= :now',
            ExpressionAttributeValues: { ':now': nowSeconds },
          }),
        )
        .catch((error: unknown) => {
          if ((error as Error).name !== 'ConditionalCheckFailedException') throw error;
        });
    }
  }

  /** The effect an owner commits with its completion. No condition of its own: fencing alone must keep it single. */
  effectOf(opIndex: number, lease: Lease, charge: Charge): EffectItem {
    const row: EffectRow = {
      sk: effectRowKey(opIndex, lease.leaseToken),
      downstreamKey: lease.downstreamKey,
      leaseToken: lease.leaseToken,
      chargeId: charge.id,
    };
    return { Put: { TableName: this.tables.paymentsTable, Item: { pk: this.effectsPk, ...row } } };
  }

  /** Deletes the run's records and effect rows, so that no later run finds them due or in its way. */
  async cleanUp(): Promise<void> {
    for (const pk of this.keys) {
      await this.tables.doc.send(new DeleteCommand({ TableName: this.tables.idempotencyTable, Key: { pk } }));
    }
    for (const row of await this.effectRows()) {
      await this.tables.doc.send(
        new DeleteCommand({ TableName: this.tables.paymentsTable, Key: { pk: this.effectsPk, sk: row.sk } }),
      );
    }
  }

  private storeOn(doc: DynamoDBDocumentClient): DynamoDbStore {
    return new DynamoDbStore({
      client: doc,
      tableName: this.tables.idempotencyTable,
      clock: this.clock,
      leaseSeconds: this.options.leaseSeconds,
      ttlSeconds: this.options.ttlSeconds,
    });
  }
}

/** One key per operation, each in a recovery shard of its own, so that the index's order is fully known. */
function keysInDistinctShards(run: string, count: number): string[] {
  if (count > RECOVERY_SHARDS) throw new Error(`at most ${RECOVERY_SHARDS} operations, one per shard`);
  const keys: string[] = [];
  const shards = new Set<string>();
  for (let n = 0; keys.length < count; n++) {
    const key = `model|${run}|op${keys.length}|${n}`;
    if (shards.has(recoveryShardOf(key))) continue;
    shards.add(recoveryShardOf(key));
    keys.push(key);
  }
  return keys;
}

export function effectRowKey(opIndex: number, leaseToken: string): string {
  return `op${opIndex}#${leaseToken}`;
}

/**
 * The response an owner stores: it names the charge and the lease that committed it, so that a second commit
 * (by an owner that should have been fenced out) could never pass for a replay of the first.
 */
export function responseOf(lease: Lease, charge: Charge): StoredResponse {
  return {
    statusCode: 201,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ charge: charge.id, downstream_key: lease.downstreamKey, committed_by: lease.leaseToken }),
  };
}
