/**
 * Type tests: the effect a handler stages follows the store it runs on, in every adapter. Compiled by
 * `npm run typecheck` (tsconfig.json includes test/), never run: each `@ts-expect-error` line must stay an error (a
 * line that starts compiling fails the typecheck with "Unused '@ts-expect-error' directive"), and each line beside
 * it without one must keep compiling.
 *
 * The mistake they lock out: a handler written for one store (staging `{ Put: ... }`) given the other store. It
 * used to compile under `--strict`, then charge and fail every commit at run time.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import middy from '@middy/core';
import type { APIGatewayProxyResult, Context } from 'aws-lambda';
import { type EffectOf, type IdempotencyHandle, type IdempotencyStore, makeIdempotent } from 'keystone-idempotency';
import { DynamoDbStore, type EffectItem } from 'keystone-idempotency/dynamodb';
import {
  type HttpEvent,
  type HttpResult,
  httpIdempotency,
  lambdaHandler,
  type WithIdempotency,
} from 'keystone-idempotency/http';
import {
  compareAndSetEffect,
  type PostgresEffect,
  type PostgresStatement,
  PostgresStore,
  type Queryable,
} from 'keystone-idempotency/postgres';
import { type RedisEffect, type RedisScriptClient, RedisStore } from 'keystone-idempotency/redis';
import { makeSqsIdempotentHandler } from 'keystone-idempotency/sqs';
import { Pool } from 'pg';

const dynamoDb = new DynamoDbStore({
  client: DynamoDBDocumentClient.from(new DynamoDBClient({})),
  tableName: 'idempotency',
});
const postgres = new PostgresStore({ pool: new Pool() });

/** Effects built elsewhere (not object literals, so no excess-property check helps): each store's own kind. */
const putItem: EffectItem = { Put: { TableName: 'orders', Item: { pk: 'ORDER#1', sk: 'SHIPMENT' } } };
const statement: PostgresStatement = { text: 'INSERT INTO shipments (order_id) VALUES ($1)', values: ['ord-1'] };
const casEffect = compareAndSetEffect({ table: 'orders', key: { id: 1 }, column: 'status', expected: 'a', next: 'b' });
const effectFunction = async (tx: Queryable) => tx.query('SELECT 1');

// --- The middy middleware: the handler's context declared from the store (`WithIdempotency<typeof store>`). ------

type DynamoDbContext = Context & WithIdempotency<typeof dynamoDb>;
type PostgresContext = Context & WithIdempotency<typeof postgres>;

async function onDynamoDb(_event: HttpEvent, context: DynamoDbContext): Promise<APIGatewayProxyResult> {
  context.idempotency.stage({ Put: { TableName: 'orders', Item: { pk: 'ORDER#1', sk: 'SHIPMENT' } } });
  context.idempotency.stage(putItem);
  // @ts-expect-error SQL staged through a DynamoDB store
  context.idempotency.stage({ text: 'INSERT INTO shipments (order_id) VALUES ($1)', values: ['ord-1'] });
  // @ts-expect-error a PostgreSQL statement built elsewhere, through a DynamoDB store
  context.idempotency.stage(statement);
  // @ts-expect-error a PostgreSQL natural-idempotency effect, through a DynamoDB store
  context.idempotency.stage(casEffect);
  // @ts-expect-error an effect function (PostgreSQL's), through a DynamoDB store
  context.idempotency.stage(effectFunction);
  // @ts-expect-error no action at all: DynamoDB needs exactly one
  context.idempotency.stage({});
  return { statusCode: 201, body: '' };
}

async function onPostgres(_event: HttpEvent, context: PostgresContext): Promise<APIGatewayProxyResult> {
  context.idempotency.stage({ text: 'INSERT INTO shipments (order_id) VALUES ($1)', values: ['ord-1'] });
  context.idempotency.stage(statement, casEffect, effectFunction);
  // @ts-expect-error a DynamoDB transaction item staged through a PostgreSQL store
  context.idempotency.stage({ Put: { TableName: 'orders', Item: { pk: 'ORDER#1', sk: 'SHIPMENT' } } });
  // @ts-expect-error a DynamoDB item built elsewhere, through a PostgreSQL store
  context.idempotency.stage(putItem);
  return { statusCode: 201, body: '' };
}

export const dynamoDbHandler = lambdaHandler(
  middy<HttpEvent, HttpResult, Error, DynamoDbContext>(onDynamoDb).use(httpIdempotency({ store: dynamoDb })),
);
export const postgresHandler = lambdaHandler(
  middy<HttpEvent, HttpResult, Error, PostgresContext>(onPostgres).use(httpIdempotency({ store: postgres })),
);

/**
 * The README's handler with its store swapped: only the `new ...Store` line changed. The context follows the store,
 * so the DynamoDB item the handler still stages is refused at its staging line.
 */
function swapped() {
  const store = new PostgresStore({ pool: new Pool() }); // was: new DynamoDbStore({ client, tableName })
  type OrderContext = Context & WithIdempotency<typeof store>;
  async function createOrder(_event: HttpEvent, context: OrderContext): Promise<APIGatewayProxyResult> {
    // @ts-expect-error the DynamoDB item the handler was written with, now under a PostgreSQL store
    context.idempotency.stage({ Put: { TableName: 'orders', Item: { pk: 'ACCOUNT#a', sk: 'ch_1' } } });
    return { statusCode: 201, body: '' };
  }
  return lambdaHandler(middy<HttpEvent, HttpResult, Error, OrderContext>(createOrder).use(httpIdempotency({ store })));
}
export const swappedHandler = swapped();

// A context names a store, never an effect type (nothing would keep that type in step with the middleware's store):
// a store's type where no store is in reach, and any store's for a handler written for any store (it stages
// `unknown`).
// @ts-expect-error an effect type is not a store
export type ExplicitContext = WithIdempotency<EffectItem>;
export const explicit = (context: WithIdempotency<DynamoDbStore>, any: WithIdempotency<IdempotencyStore<unknown>>) => {
  context.idempotency.stage(putItem);
  // @ts-expect-error SQL through a context declared for a DynamoDB store
  context.idempotency.stage(statement);
  any.idempotency.stage(putItem, statement);
};

// --- makeIdempotent: the handle's effect type is the store's. ------------------------------------------------------

interface Order {
  readonly orderId: string;
}

export const onDynamoDbFn = makeIdempotent(
  async (order: Order, idempotency) => {
    idempotency.stage({ Put: { TableName: 'orders', Item: { pk: `ORDER#${order.orderId}`, sk: 'SHIPMENT' } } });
    idempotency.stage(putItem);
    // @ts-expect-error SQL staged through a DynamoDB store
    idempotency.stage({ text: 'INSERT INTO shipments (order_id) VALUES ($1)', values: [order.orderId] });
    // @ts-expect-error a PostgreSQL statement built elsewhere, through a DynamoDB store
    idempotency.stage(statement);
    // @ts-expect-error an effect function, through a DynamoDB store
    idempotency.stage(effectFunction);
    return { shipped: order.orderId };
  },
  { store: dynamoDb, name: 'ship', key: (order) => order.orderId },
);

export const onPostgresFn = makeIdempotent(
  async (order: Order, idempotency) => {
    idempotency.stage({ text: 'INSERT INTO shipments (order_id) VALUES ($1)', values: [order.orderId] });
    idempotency.stage(statement, casEffect, effectFunction);
    // @ts-expect-error a DynamoDB transaction item staged through a PostgreSQL store
    idempotency.stage({ Put: { TableName: 'orders', Item: { pk: `ORDER#${order.orderId}`, sk: 'SHIPMENT' } } });
    // @ts-expect-error a DynamoDB item built elsewhere, through a PostgreSQL store
    idempotency.stage(putItem);
    return { shipped: order.orderId };
  },
  { store: postgres, name: 'ship', key: (order) => order.orderId },
);

// A function written for the other store's handle is refused where it is given (the store decides, not the function).
export const annotatedWrong = makeIdempotent(
  // @ts-expect-error a function taking a DynamoDB handle, given a PostgreSQL store
  async (order: Order, idempotency: IdempotencyHandle<EffectItem>) => {
    idempotency.stage(putItem);
    return order.orderId;
  },
  { store: postgres, name: 'ship', key: (order) => order.orderId },
);
// One written for any store's effects (generic: it stages only effects it is given) serves either.
async function shipWith<TEffect>(order: Order, idempotency: IdempotencyHandle<TEffect>, effect?: TEffect) {
  if (effect !== undefined) idempotency.stage(effect);
  return order.orderId;
}
export const generic = [
  makeIdempotent(shipWith<PostgresEffect>, { store: postgres, name: 'ship', key: (order) => order.orderId }),
  makeIdempotent(shipWith<EffectItem>, { store: dynamoDb, name: 'ship', key: (order) => order.orderId }),
];
// A function that may stage anything (`IdempotencyHandle<unknown>`) is refused by a store that takes one kind.
export const stagesAnything = makeIdempotent(
  // @ts-expect-error its handle would take any effect; the PostgreSQL store's takes SQL only
  async (order: Order, _idempotency: IdempotencyHandle<unknown>) => order.orderId,
  { store: postgres, name: 'ship', key: (order) => order.orderId },
);

// --- The SQS adapter: the record context stages the store's effects. ------------------------------------------------

export const sqsOnDynamoDb = makeSqsIdempotentHandler({
  store: dynamoDb,
  name: 'orders-fulfilment',
  process: async (_record, ctx) => {
    ctx.stage({ Put: { TableName: 'orders', Item: { pk: 'ORDER#1', sk: 'SHIPMENT' } } });
    ctx.stage(putItem);
    // @ts-expect-error SQL staged through a DynamoDB store
    ctx.stage({ text: 'INSERT INTO shipments (order_id) VALUES ($1)', values: ['ord-1'] });
    // @ts-expect-error a PostgreSQL statement built elsewhere, through a DynamoDB store
    ctx.stage(statement);
    // @ts-expect-error an effect function, through a DynamoDB store
    ctx.stage(effectFunction);
    return { shipped: true };
  },
});

export const sqsOnPostgres = makeSqsIdempotentHandler({
  store: postgres,
  name: 'orders-fulfilment',
  process: async (_record, ctx) => {
    ctx.stage({ text: 'INSERT INTO shipments (order_id) VALUES ($1)', values: ['ord-1'] });
    ctx.stage(statement, casEffect, effectFunction);
    // @ts-expect-error a DynamoDB transaction item staged through a PostgreSQL store
    ctx.stage({ Put: { TableName: 'orders', Item: { pk: 'ORDER#1', sk: 'SHIPMENT' } } });
    // @ts-expect-error a DynamoDB item built elsewhere, through a PostgreSQL store
    ctx.stage(putItem);
    return { shipped: true };
  },
});

// --- The types underneath: each store's effect type, and the two stores and handles kept apart. --------------------

export const effectTypes: [EffectOf<DynamoDbStore>, EffectOf<PostgresStore>] = [putItem, statement];
// @ts-expect-error a DynamoDB store is not a store of PostgreSQL effects
export const notPostgres: IdempotencyStore<PostgresEffect> = dynamoDb;
// @ts-expect-error a PostgreSQL store is not a store of DynamoDB items
export const notDynamoDb: IdempotencyStore<EffectItem> = postgres;
// A service written once for either store erases the effect type: every store serves as a store of `unknown`.
export const eitherStore: IdempotencyStore<unknown>[] = [dynamoDb, postgres];
export const handles = (dynamoDbHandle: IdempotencyHandle<EffectItem>, anyHandle: IdempotencyHandle<unknown>) => {
  // @ts-expect-error a handle staging DynamoDB items does not stage PostgreSQL effects
  const wrong: IdempotencyHandle<PostgresEffect> = dynamoDbHandle;
  // A handle that takes anything serves where a narrower one is asked for.
  const narrower: IdempotencyHandle<EffectItem> = anyHandle;
  return [wrong, narrower];
};

// --- The Redis store: its effects are commands on keys of its hash slot, and nothing else stages there. ------------

declare const redisClient: RedisScriptClient;
const redis = new RedisStore({ client: redisClient });
const redisEffect: RedisEffect = { incrBy: redis.effectKey('orders:count'), by: 1 };

export const onRedisFn = makeIdempotent(
  async (order: { orderId: string }, idempotency) => {
    idempotency.stage({ hset: redis.effectKey(`order:${order.orderId}`), field: 'status', value: 'shipped' });
    idempotency.stage(redisEffect, { set: redis.effectKey('last'), value: order.orderId, ifAbsent: true });
    // @ts-expect-error a DynamoDB transaction item staged through a Redis store
    idempotency.stage({ Put: { TableName: 'orders', Item: { pk: 'ORDER#1', sk: 'SHIPMENT' } } });
    // @ts-expect-error a PostgreSQL statement, through a Redis store
    idempotency.stage(statement);
    // @ts-expect-error incrBy counts by a number, not a string
    idempotency.stage({ incrBy: redis.effectKey('n'), by: '1' });
    return { shipped: true };
  },
  { store: redis, name: 'ship', key: (order) => order.orderId },
);
export const redisEffectType: EffectOf<RedisStore> = redisEffect;
// @ts-expect-error a Redis store is not a store of DynamoDB items
export const redisNotDynamoDb: IdempotencyStore<EffectItem> = redis;
