import { randomUUID } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { type DynamoDbFaultProxy, startDynamoDbFaultProxy } from '@keystone-idempotency/local-aws/dynamodb-fault-proxy';
import { type PostgresFaultProxy, startPostgresFaultProxy } from '@keystone-idempotency/local-aws/postgres-fault-proxy';
import { fromItem } from '../../src/dynamodb/codec';
import {
  DEFAULT_MAX_RESPONSE_BYTES as DYNAMODB_MAX_RESPONSE,
  DynamoDbStore,
  type EffectItem,
} from '../../src/dynamodb/store';
import type { Clock } from '../../src/engine/clock';
import type { IdempotencyStore } from '../../src/engine/contract';
import { splitScopedKey } from '../../src/engine/key';
import type { IdempotencyRecord } from '../../src/engine/record';
import { fromJson, type RecordJson } from '../../src/postgres/codec';
import { migrate } from '../../src/postgres/migrate';
import { recordJson, tableNames } from '../../src/postgres/schema';
import {
  DEFAULT_MAX_RESPONSE_BYTES as POSTGRES_MAX_RESPONSE,
  type PostgresEffect,
  PostgresStore,
} from '../../src/postgres/store';
import { createIdempotencyTable, localClient, localDocumentClient, testDatabase } from './dynamodb';
import { engineRequests } from './engine-requests';
import { testPostgres } from './postgres';
import { postgresEngineRequests } from './postgres-engine-requests';

/** A store's options as the contract suite varies them. */
export interface HarnessStoreOptions {
  readonly clock?: Clock;
  readonly leaseSeconds?: number;
  readonly ttlSeconds?: number;
}

/** The steps of the protocol whose reply a test can lose on the way back from the database. */
export type Step = 'claim' | 'takeover' | 'release' | 'completion' | 'commit';

/**
 * What the contract suite needs of a store, to run the same test against DynamoDB and PostgreSQL: a store with a
 * clock and options, an effect that writes one row, how many rows a key has, an effect whose own condition fails,
 * the round trips spent, the record as stored, and replies lost on the wire. Each is made inside a `describe`, whose
 * hooks create (and drop) its tables.
 */
export interface StoreHarness {
  readonly name: 'DynamoDB' | 'PostgreSQL';
  store(options?: HarnessStoreOptions): IdempotencyStore<unknown>;
  /** Stores on a table of their own, for a test that must not see what other tests left behind. */
  isolatedStores(): Promise<(options?: HarnessStoreOptions) => IdempotencyStore<unknown>>;
  /** Writes one row under `pk`, refused (its own condition) if the row `pk`/`id` exists already. */
  effect(pk: string, id: string): unknown;
  /** Writes one row under `pk`, unconditionally (a second one with the same id changes nothing). */
  unconditionalEffect(pk: string, id: string): unknown;
  /** An effect whose own condition fails: it checks for a row that is not there. */
  blockedEffect(): unknown;
  /** How many effect rows `pk` has: the witness for "the effect happened". */
  rowsUnder(pk: string): Promise<number>;
  /** Round trips to the database since the last reset: requests on DynamoDB, flights on PostgreSQL's socket. */
  readonly roundTrips: { reset(): void; readonly count: number };
  /** The record under `key` as the database holds it (past its expiry or not), or undefined. */
  stored(key: string, store?: IdempotencyStore<unknown>): Promise<IdempotencyRecord | undefined>;
  /** The largest response the store keeps by default. */
  readonly maxResponseBytes: number;
  /** Stores whose requests go through a fault proxy, and the means to lose their replies. */
  readonly faults: {
    /** `attempts`: how many times the store's client sends a request whose reply was lost (SDK or store retries). */
    store(options?: HarnessStoreOptions & { attempts?: number }): IdempotencyStore<unknown>;
    /** The next `times` requests of `step` on `key` are applied by the database and lose their reply. */
    loseReplies(step: Step, key: string, times?: number): { fired(): number };
  };
}

export function dynamoDbHarness(): StoreHarness {
  const db = testDatabase();
  let proxy: DynamoDbFaultProxy;
  const proxied: DynamoDBClient[] = [];
  beforeAll(async () => {
    proxy = await startDynamoDbFaultProxy(process.env.DYNAMODB_ENDPOINT!);
  });
  afterAll(async () => {
    for (const client of proxied) client.destroy();
    await proxy?.close();
  });
  const storeOn = (tableName: string, options: HarnessStoreOptions = {}, doc = db.doc) =>
    new DynamoDbStore({ client: doc, tableName, leaseSeconds: 30, ...options });
  return {
    name: 'DynamoDB',
    store: (options) => storeOn(db.idempotencyTable, options),
    async isolatedStores() {
      const tableName = await createIdempotencyTable(db.client);
      return (options) => storeOn(tableName, options);
    },
    effect: (pk, id): EffectItem => ({
      Put: {
        TableName: db.effectsTable,
        Item: { pk, sk: `PAYMENT#${id}` },
        ConditionExpression: 'attribute_not_exists(pk)',
      },
    }),
    unconditionalEffect: (pk, id): EffectItem => ({
      Put: { TableName: db.effectsTable, Item: { pk, sk: `PAYMENT#${id}` } },
    }),
    blockedEffect: (): EffectItem => ({
      ConditionCheck: {
        TableName: db.effectsTable,
        Key: { pk: `missing-${randomUUID()}`, sk: 'x' },
        ConditionExpression: 'attribute_exists(pk)',
      },
    }),
    rowsUnder: (pk) => db.itemsUnder(pk),
    roundTrips: {
      reset: () => db.requests.reset(),
      get count() {
        return db.requests.sent.length;
      },
    },
    async stored(key, store) {
      const tableName = store instanceof DynamoDbStore ? store.tableName : db.idempotencyTable;
      const { Item } = await db.doc.send(
        new GetCommand({ TableName: tableName, Key: { pk: key }, ConsistentRead: true }),
      );
      return Item ? fromItem(Item) : undefined;
    },
    maxResponseBytes: DYNAMODB_MAX_RESPONSE,
    faults: {
      store({ attempts, ...options } = {}) {
        const client = localClient({ endpoint: proxy.url, ...(attempts ? { maxAttempts: attempts } : {}) });
        proxied.push(client);
        return storeOn(db.idempotencyTable, options, localDocumentClient(client));
      },
      loseReplies(step, key, times = 1) {
        const match = engineRequests(db.idempotencyTable)[step](key);
        return proxy.arm({ match, fault: { mode: 'drop-reply' }, count: times });
      },
    },
  };
}

export function postgresHarness(): StoreHarness {
  const pg = testPostgres();
  let proxy: PostgresFaultProxy;
  beforeAll(async () => {
    proxy = await startPostgresFaultProxy(process.env.POSTGRES_URL!);
  });
  afterAll(() => proxy?.close());
  return {
    name: 'PostgreSQL',
    store: (options) => pg.store(options),
    async isolatedStores() {
      const table = `keys_${randomUUID().replaceAll('-', '').slice(0, 8)}`;
      await migrate(pg.pool, { schema: pg.schema, table });
      return (options) => pg.store({ ...options, table });
    },
    effect: (pk, id): PostgresEffect => ({
      text: `INSERT INTO ${pg.effectsTable} (pk, sk) VALUES ($1, $2)`,
      values: [pk, `PAYMENT#${id}`],
    }),
    unconditionalEffect: (pk, id): PostgresEffect => ({
      text: `INSERT INTO ${pg.effectsTable} (pk, sk) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
      values: [pk, `PAYMENT#${id}`],
    }),
    blockedEffect: (): PostgresEffect => ({
      text: `UPDATE ${pg.effectsTable} SET sk = sk WHERE pk = $1 RETURNING 1`,
      values: [`missing-${randomUUID()}`],
      expectRows: 1,
    }),
    rowsUnder: (pk) => pg.rowsUnder(pk),
    roundTrips: pg.roundTrips,
    async stored(key, store) {
      const names = store instanceof PostgresStore ? store.names : tableNames({ schema: pg.schema });
      const { scope, clientKey } = splitScopedKey(key);
      const { rows } = await pg.pool.query<{ record: RecordJson }>(
        `SELECT ${recordJson('r')} AS record FROM ${names.table} AS r WHERE r.scope = $1 AND r.key = $2`,
        [scope, clientKey],
      );
      return rows[0] ? fromJson(rows[0].record) : undefined;
    },
    maxResponseBytes: POSTGRES_MAX_RESPONSE,
    faults: {
      store: ({ attempts, ...options } = {}) =>
        pg.store({
          ...options,
          pool: pg.pool2({ connectionString: proxy.url, pipeline: true }),
          ...(attempts ? { connectionAttempts: attempts } : {}),
        }),
      loseReplies(step, key, times = 1) {
        const match = postgresEngineRequests()[step](key);
        return proxy.arm({ match, fault: { mode: 'drop-reply' }, count: times });
      },
    },
  };
}

/** Both stores, for `describe.each`: each harness is made inside its own describe block. */
export const storeHarnesses: readonly [string, () => StoreHarness][] = [
  ['DynamoDB', dynamoDbHarness],
  ['PostgreSQL', postgresHarness],
];
