import { BatchGetCommand, DeleteCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import {
  type PostgresFaultProxy,
  startPostgresFaultProxy,
  type WireRequest,
} from '@keystone-idempotency/local-aws/postgres-fault-proxy';
import { ConfiguredRetryStrategy } from '@smithy/core/retry';
import type { Pool } from 'pg';
import { fromItem } from '../../../src/dynamodb/codec';
import { RECOVERY_SHARDS } from '../../../src/dynamodb/layout';
import { recoveryShardOf } from '../../../src/dynamodb/recovery-index';
import { DynamoDbStore } from '../../../src/dynamodb/store';
import { splitScopedKey } from '../../../src/engine/key';
import { fromJson, type RecordJson } from '../../../src/postgres/codec';
import { recordJson } from '../../../src/postgres/schema';
import type { PostgresStore } from '../../../src/postgres/store';
import { fromPairs } from '../../../src/redis/codec';
import {
  Delivery,
  type EffectRow,
  type ProtocolBackend,
  type StoredItem,
  type StoreSettings,
} from '../../../src/testing/protocol/system';
import { localClient, localDocumentClient, testDatabase } from '../dynamodb';
import { testPostgres } from '../postgres';
import { type RedisClient, type RedisPool, redisEngineCommands, scriptCallOf, testRedis } from '../redis';

/** The protocol model on DynamoDB Local: replies lost inside the AWS SDK, after DynamoDB answered. */
export function dynamoDbProtocol(): ProtocolBackend {
  const db = testDatabase();
  const storeOn = (doc: typeof db.doc, settings: StoreSettings) =>
    new DynamoDbStore({ client: doc, tableName: db.idempotencyTable, ...settings });
  return {
    keys: keysInDistinctShards,
    dueRank: (key) => Number(recoveryShardOf(key)),

    async via(delivery, settings, use) {
      if (delivery === Delivery.direct) return use(storeOn(db.doc, settings));
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
        return await use(storeOn(localDocumentClient(client), settings));
      } finally {
        client.destroy();
      }
    },

    async records(keys) {
      const { Responses } = await db.doc.send(
        new BatchGetCommand({
          RequestItems: { [db.idempotencyTable]: { Keys: keys.map((pk) => ({ pk })), ConsistentRead: true } },
        }),
      );
      const items = Responses?.[db.idempotencyTable] ?? [];
      return keys.map((pk) => {
        const item = items.find((candidate) => candidate.pk === pk);
        return item ? { ...fromItem(item), inRecoveryIndex: item.recoveryShard !== undefined } : undefined;
      });
    },

    async effectRows(effectsPk) {
      const rows: EffectRow[] = [];
      let start: Record<string, unknown> | undefined;
      do {
        const page = await db.doc.send(
          new QueryCommand({
            TableName: db.effectsTable,
            KeyConditionExpression: 'pk = :pk',
            ExpressionAttributeValues: { ':pk': effectsPk },
            ConsistentRead: true,
            ...(start ? { ExclusiveStartKey: start } : {}),
          }),
        );
        rows.push(...((page.Items ?? []) as unknown as EffectRow[]));
        start = page.LastEvaluatedKey;
      } while (start);
      return rows;
    },

    // Counts its writes: a transaction applied twice (a lost reply sent again, unrecognised) shows as 2.
    effect: (effectsPk, row) => ({
      Update: {
        TableName: db.effectsTable,
        Key: { pk: effectsPk, sk: row.sk },
        UpdateExpression: 'SET downstreamKey = :d, leaseToken = :l, chargeId = :c ADD writes :one',
        ExpressionAttributeValues: { ':d': row.downstreamKey, ':l': row.leaseToken, ':c': row.chargeId, ':one': 1 },
      },
    }),

    /**
     * What DynamoDB's TTL does, some time after an item's expiry: deletes it, unless it was written a later expiry
     * meanwhile. DynamoDB Local can't be told to sweep now, so the test deletes on its behalf, on the same condition.
     */
    async sweepExpired(keys, settings) {
      const nowSeconds = Math.floor(settings.clock.now() / 1000);
      for (const pk of keys) {
        await db.doc
          .send(
            new DeleteCommand({
              TableName: db.idempotencyTable,
              Key: { pk },
              ConditionExpression: 'expiresAt <= :now',
              ExpressionAttributeValues: { ':now': nowSeconds },
            }),
          )
          .catch((error: unknown) => {
            if ((error as Error).name !== 'ConditionalCheckFailedException') throw error;
          });
      }
    },

    async cleanUp(keys, effectsPk) {
      for (const pk of keys) {
        await db.doc.send(new DeleteCommand({ TableName: db.idempotencyTable, Key: { pk } }));
      }
      for (const row of await this.effectRows(effectsPk)) {
        await db.doc.send(new DeleteCommand({ TableName: db.effectsTable, Key: { pk: effectsPk, sk: row.sk } }));
      }
    },
  };
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

/**
 * The protocol model on PostgreSQL: replies lost on the wire, through the fault proxy, after PostgreSQL ran the
 * request (a COMMIT, or a statement on its own). `sdk-retry` loses the first reply to each distinct request (the
 * store sends the very same request again, on a fresh connection); `reply-lost` loses every one, with a store that
 * does not send again.
 */
export function postgresProtocol(): ProtocolBackend {
  const pg = testPostgres();
  const effects = `"${pg.schema}".model_effects`;
  let proxy: PostgresFaultProxy;
  let retrying: Pool;
  let giving: Pool;
  beforeAll(async () => {
    proxy = await startPostgresFaultProxy(process.env.POSTGRES_URL!);
    retrying = pg.pool2({ connectionString: proxy.url, pipeline: true });
    giving = pg.pool2({ connectionString: proxy.url, pipeline: true });
    await pg.pool.query(
      `CREATE TABLE ${effects} (pk text, sk text, downstream_key text, lease_token text, charge_id text,
         writes int NOT NULL DEFAULT 1, PRIMARY KEY (pk, sk))`,
    );
  });
  afterAll(() => proxy?.close());
  const storeOn = (pool: Pool, settings: StoreSettings, connectionAttempts?: number): PostgresStore =>
    pg.store({ pool, ...settings, ...(connectionAttempts ? { connectionAttempts } : {}) });
  /** A request whose reply says whether a write landed: a statement on its own, or a COMMIT. */
  const ending = (request: WireRequest) =>
    request.text === 'COMMIT' || (request.transaction.length === 0 && request.text !== 'BEGIN');
  const identity = (request: WireRequest) =>
    JSON.stringify([...request.transaction, request].map((r) => [r.text, r.params]));
  return {
    keys: (run, count) => Array.from({ length: count }, (_, i) => `model|${run}|op${i}`),
    dueRank: (key) => Number(/op(\d+)$/.exec(key)?.[1]),

    async via(delivery, settings, use) {
      if (delivery === Delivery.direct) return use(storeOn(pg.pool, settings));
      if (delivery === Delivery.sdkRetry) {
        const seen = new Set<string>();
        const firstSending = (request: WireRequest) => {
          if (!ending(request) || seen.has(identity(request))) return false;
          seen.add(identity(request));
          return true;
        };
        const rule = proxy.arm({
          match: { name: 'first sending', when: firstSending },
          fault: { mode: 'drop-reply' },
          count: Number.POSITIVE_INFINITY,
        });
        try {
          return await use(storeOn(retrying, settings));
        } finally {
          rule.disarm();
        }
      }
      const rule = proxy.arm({
        match: { name: 'every reply', when: ending },
        fault: { mode: 'drop-reply' },
        count: Number.POSITIVE_INFINITY,
      });
      try {
        return await use(storeOn(giving, settings, 1));
      } catch (error) {
        // The store does not send again: the first lost reply is the call's end, as the caller sees it.
        if (rule.fired() > 0) throw new Error('reply lost', { cause: error });
        throw error;
      } finally {
        rule.disarm();
      }
    },

    async records(keys) {
      const { rows } = await pg.pool.query<{ record: RecordJson }>(
        `SELECT ${recordJson('r')} AS record FROM "${pg.schema}".idempotency_keys AS r
          WHERE (r.scope, r.key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
        [keys.map((key) => splitScopedKey(key).scope), keys.map((key) => splitScopedKey(key).clientKey)],
      );
      const records = rows.map((row) => fromJson(row.record));
      return keys.map((key): StoredItem | undefined => {
        const record = records.find((candidate) => candidate.key === key);
        return record ? { ...record, inRecoveryIndex: record.recoverAt !== undefined } : undefined;
      });
    },

    async effectRows(effectsPk) {
      const { rows } = await pg.pool.query<EffectRow>(
        `SELECT sk, downstream_key AS "downstreamKey", lease_token AS "leaseToken", charge_id AS "chargeId", writes
           FROM ${effects} WHERE pk = $1`,
        [effectsPk],
      );
      return rows;
    },

    effect: (effectsPk, row) => ({
      // Counts its writes: a transaction applied twice (a lost reply sent again, unrecognised) shows as 2.
      text: `INSERT INTO ${effects} (pk, sk, downstream_key, lease_token, charge_id) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (pk, sk) DO UPDATE SET writes = ${effects}.writes + 1`,
      values: [effectsPk, row.sk, row.downstreamKey, row.leaseToken, row.chargeId],
    }),

    /** The store's own purge, the scheduled completer's, at the run's time. */
    async sweepExpired(_keys, settings) {
      await storeOn(pg.pool, settings).purgeExpired();
    },

    async cleanUp(keys, effectsPk) {
      await pg.pool.query(
        `DELETE FROM "${pg.schema}".idempotency_keys WHERE (scope, key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
        [keys.map((key) => splitScopedKey(key).scope), keys.map((key) => splitScopedKey(key).clientKey)],
      );
      await pg.pool.query(`DELETE FROM ${effects} WHERE pk = $1`, [effectsPk]);
    },
  };
}

/**
 * The protocol model on Redis: replies lost on the wire, through the fault proxy, after Redis ran the script.
 * `sdk-retry` loses the first reply to each distinct script call (the store sends the same call again, on a
 * reconnected connection, by EVALSHA where the first went by EVAL when another call loaded the script meanwhile);
 * `reply-lost` loses every one, with a store that does not send again.
 *
 * A reply is lost by closing its connection, which loses the reply of every other command on it too. `sdk-retry`
 * promises each call loses at most its first reply, so it runs on a pool, a connection to each command while it
 * runs: on one shared client, recovery's concurrent takeovers lost each other's second sendings (one's first sending
 * closed the connection under the other's retry, or under its first sending before the proxy read it, so that its
 * retry counted as a first), two lost replies where the store sends twice. That many blips fail a real store too, and
 * recovery counts the operation failed and leaves it due; it is not what `sdk-retry` models.
 */
export function redisProtocol(): ProtocolBackend {
  const redis = testRedis();
  const any = redisEngineCommands().any();
  let retrying: RedisPool;
  let giving: RedisClient;
  beforeAll(async () => {
    retrying = await redis.newProxiedPool();
    giving = await redis.newProxiedClient();
    // Each client's eviction check made before any of its replies is lost.
    for (const client of [retrying, giving]) await redis.store({ client }).get('warm-up');
  });
  const effectsKey = (effectsPk: string) => redis.key(`model:${effectsPk}`);
  return {
    keys: (run, count) => Array.from({ length: count }, (_, i) => `model|${run}|op${i}`),
    // Members of a sorted set with one score sort by their bytes: op0 before op1.
    dueRank: (key) => Number(/op(\d+)$/.exec(key)?.[1]),

    async via(delivery, settings, use) {
      if (delivery === Delivery.direct) return use(redis.store(settings));
      if (delivery === Delivery.sdkRetry) {
        const seen = new Set<string>();
        const rule = redis.proxy.arm({
          match: {
            name: 'first sending',
            when: (command) => {
              const identity = scriptCallOf(command);
              if (identity === undefined || seen.has(identity)) return false;
              seen.add(identity);
              return true;
            },
          },
          fault: { mode: 'drop-reply' },
          count: Number.POSITIVE_INFINITY,
        });
        try {
          return await use(redis.store({ ...settings, client: retrying, attempts: 2 }));
        } finally {
          rule.disarm();
        }
      }
      const rule = redis.proxy.arm({ match: any, fault: { mode: 'drop-reply' }, count: Number.POSITIVE_INFINITY });
      try {
        return await use(redis.store({ ...settings, client: giving, attempts: 1 }));
      } catch (error) {
        if (rule.fired() > 0) throw new Error('reply lost', { cause: error });
        throw error;
      } finally {
        rule.disarm();
      }
    },

    async records(keys) {
      const store = redis.store();
      return Promise.all(
        keys.map(async (key): Promise<StoredItem | undefined> => {
          const record = fromPairs(Object.entries(await redis.direct.hGetAll(store.recordKey(key))).flat());
          if (!record) return undefined;
          const score = await redis.direct.zScore(store.recoverySetKey, key);
          return { ...record, inRecoveryIndex: score !== null };
        }),
      );
    },

    async effectRows(effectsPk) {
      const rows = await redis.direct.hGetAll(effectsKey(effectsPk));
      return Object.values(rows).map((row) => JSON.parse(String(row)) as EffectRow);
    },

    effect: (effectsPk, row) => ({ hset: effectsKey(effectsPk), field: row.sk, value: JSON.stringify(row) }),

    /**
     * What Redis's own expiry does once a record's TTL has run out (the TTL runs on the server's clock, which the
     * run's clock does not move): deletes a record past its expiry that is not in the recovery set (one there has
     * no TTL), in one script, as the TTL would.
     */
    async sweepExpired(keys, settings) {
      const store = redis.store();
      for (const key of keys) {
        await redis.direct.eval(
          `local f = redis.call('HMGET', KEYS[1], 'recoverAt', 'expiresAt')
           if (not f[1]) and f[2] and tonumber(f[2]) * 1000 <= tonumber(ARGV[1]) then redis.call('DEL', KEYS[1]) end`,
          { keys: [store.recordKey(key)], arguments: [String(settings.clock.now())] },
        );
      }
    },

    async cleanUp(keys, effectsPk) {
      const store = redis.store();
      for (const key of keys) {
        await redis.direct.del(store.recordKey(key));
        await redis.direct.zRem(store.recoverySetKey, key);
      }
      await redis.direct.del(effectsKey(effectsPk));
    },
  };
}

/** Every store, for `describe.each`: each backend is made inside its own describe block. */
export const protocolBackends: readonly [string, () => ProtocolBackend][] = [
  ['DynamoDB', dynamoDbProtocol],
  ['PostgreSQL', postgresProtocol],
  ['Redis', redisProtocol],
];
