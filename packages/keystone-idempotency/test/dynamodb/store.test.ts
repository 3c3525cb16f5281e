import { randomUUID } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { type DynamoDbFaultProxy, startDynamoDbFaultProxy } from '@keystone-idempotency/local-aws/dynamodb-fault-proxy';
import { RecordAttribute } from '../../src/dynamodb/layout';
import { DynamoDbStore, type EffectItem } from '../../src/dynamodb/store';
import { EffectKindError } from '../../src/engine/errors';
import { scopedKey } from '../../src/engine/key';
import { type Lease, RecordStatus, type StoredResponse } from '../../src/engine/record';
import { localClient, localDocumentClient, testDatabase } from '../support/dynamodb';
import { engineRequests } from '../support/engine-requests';
import { FakeClock } from '../support/fake-clock';

/**
 * What is particular to DynamoDB: which request each step is (the store contract, test/engine/store.test.ts, counts
 * them as round trips on both stores), the transaction token DynamoDB remembers for 10 minutes, the attributes of
 * the recovery index, and transaction conflicts.
 */
const db = testDatabase();
const { doc, requests } = db;

const created: StoredResponse = {
  statusCode: 201,
  body: '{"id":"pay_1"}',
  headers: { 'Content-Type': 'application/json' },
};
const newKey = (account = 'acct_1') =>
  scopedKey({ accountId: account, operation: 'POST /payments', key: randomUUID() });
const store = (clock = new FakeClock(), options: { leaseSeconds?: number; ttlSeconds?: number } = {}) =>
  new DynamoDbStore({ client: doc, tableName: db.idempotencyTable, clock, leaseSeconds: 30, ...options });

/** One payment row per operation: the witness for "the effect happened once". */
const paymentRow = (pk: string, id: string): EffectItem => ({
  Put: {
    TableName: db.effectsTable,
    Item: { pk, sk: `PAYMENT#${id}` },
    ConditionExpression: 'attribute_not_exists(pk)',
  },
});

async function acquire(s: DynamoDbStore, key: string, fp = 'fp'): Promise<Lease> {
  const outcome = await s.claim(key, fp);
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

describe('the request each step is', () => {
  it('is one conditional PutItem for a first claim, an in-flight duplicate and a replay', async () => {
    const key = newKey();
    const s = store();
    requests.reset();
    const first = await acquire(s, key);
    expect((await s.claim(key, 'fp')).kind).toBe('in_flight');
    expect(requests.sent).toEqual(['PutItemCommand', 'PutItemCommand']);
    await s.commit(first, created);
    requests.reset();
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
    expect(requests.sent).toEqual(['PutItemCommand']);
  });

  it('is one TransactWriteItems for a commit with effects, one UpdateItem for a commit without', async () => {
    const s = store();
    const withEffects = newKey();
    const lease = await acquire(s, withEffects);
    requests.reset();
    await s.commit(lease, created, [paymentRow(withEffects, 'p')]);
    expect(requests.sent).toEqual(['TransactWriteItemsCommand']);
    const without = await acquire(s, newKey());
    requests.reset();
    await s.commit(without, created);
    expect(requests.sent).toEqual(['UpdateItemCommand']);
  });

  it('is one TransactWriteItems for a one-shot commit, and for its duplicate, answered from the cancellation', async () => {
    const s = store();
    const key = newKey();
    const build = (id: string) => async () => ({ response: created, effects: [paymentRow(key, id)] });
    requests.reset();
    await s.claimAndCommit(key, 'fp', build('p1'));
    expect(await s.claimAndCommit(key, 'fp', build('p2'))).toMatchObject({ kind: 'replay' });
    expect(requests.sent).toEqual(['TransactWriteItemsCommand', 'TransactWriteItemsCommand']);
  });
});

describe('an effect that is not a DynamoDB transaction item', () => {
  /** SQL a PostgreSQL store would run, handed over by a JavaScript caller or through a cast. */
  const sql = { text: 'INSERT INTO payments (id) VALUES ($1)', values: ['p'] } as unknown as EffectItem;

  it('is refused by commit before any request is sent, and the key is then released, not stuck', async () => {
    const s = store();
    const key = newKey();
    const lease = await acquire(s, key);
    requests.reset();
    const error = await s.commit(lease, created, [paymentRow(key, 'p'), sql]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EffectKindError);
    expect(error).toMatchObject({ index: 1, message: expect.stringContaining('it has `text` (a SQL statement') });
    expect(requests.sent).toEqual([]);
    expect(await db.itemsUnder(key)).toBe(0);
    expect((await s.get(key))?.status).toBe(RecordStatus.InProgress);
    expect(await s.release(lease)).toBe(true);
    expect((await s.get(key))?.status).toBe(RecordStatus.Released);
  });

  it('is refused by a one-shot commit before any request is sent: the key stays free', async () => {
    const s = store();
    const key = newKey();
    const effectFunction = (async () => undefined) as unknown as EffectItem;
    requests.reset();
    await expect(
      s.claimAndCommit(key, 'fp', async () => ({ response: created, effects: [effectFunction] })),
    ).rejects.toThrow(/effect 0 is not a DynamoDB transaction item .*it is a function/);
    expect(requests.sent).toEqual([]);
    expect(await s.get(key)).toBeUndefined();
  });

  it('is told apart from a transaction item by checkEffect, which names what is wrong', () => {
    const s = store();
    const item = { TableName: db.effectsTable, Key: { pk: 'a', sk: 'b' } };
    for (const good of [
      { Put: { TableName: db.effectsTable, Item: { pk: 'a', sk: 'b' } } },
      { Update: { ...item, UpdateExpression: 'SET n = :n', ExpressionAttributeValues: { ':n': 1 } } },
      { Delete: item },
      { ConditionCheck: { ...item, ConditionExpression: 'attribute_exists(pk)' } },
      { Delete: item, Put: undefined },
    ]) {
      expect(() => s.checkEffect(good, 0)).not.toThrow();
    }
    const refusals: [unknown, string][] = [
      [{ text: 'DELETE FROM payments' }, 'it has `text`'],
      [async () => undefined, 'it is a function'],
      [null, 'it is null'],
      [[{ Delete: item }], 'it is an array'],
      ['Put', 'it is string'],
      [{}, 'it has none of them'],
      [{ Put: item, Delete: item }, 'it has Put and Delete'],
      [{ Delete: item, TableName: 'payments' }, 'it also has TableName'],
      [{ Delete: 'payments' }, 'its Delete is not an object'],
    ];
    for (const [effect, reason] of refusals) {
      expect(() => s.checkEffect(effect, 3)).toThrow(
        new RegExp(`^effect 3 is not a DynamoDB .*: ${literally(reason)}`),
      );
    }
  });
});

const literally = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('a commit sent again', () => {
  /** Lets the first request of the given command reach DynamoDB, then loses its reply. */
  function loseFirstReply(commandName: string, maxAttempts = 3) {
    const lossy = localClient({ maxAttempts });
    let lost = false;
    lossy.middlewareStack.add(
      (next, context) => async (args) => {
        const result = await next(args);
        if (!lost && context.commandName === commandName) {
          lost = true;
          throw Object.assign(new Error('socket hang up'), { name: 'TimeoutError', $retryable: {} });
        }
        return result;
      },
      { step: 'deserialize', name: 'loseFirstReply' },
    );
    return { client: lossy, wasLost: () => lost };
  }

  it('recognises its own completion after DynamoDB forgot its token', async () => {
    // DynamoDB keeps a ClientRequestToken 10 minutes. Sent again after that, the transaction runs anew and is
    // cancelled with [None, ConditionalCheckFailed]: the effect (unconditional) would pass, the completion's fence
    // fails against our own completion. That is this owner's success, not a lost lease (a 409 for its own work).
    const { client: lossy, wasLost } = loseFirstReply('TransactWriteItemsCommand', 1);
    let sent = 0;
    lossy.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'TransactWriteItemsCommand' && ++sent > 1) {
          // What DynamoDB sees 10 minutes later: a token it has never seen.
          (args.input as { ClientRequestToken?: string }).ClientRequestToken = randomUUID();
        }
        return next(args);
      },
      { step: 'initialize', name: 'forgetToken' },
    );
    const s = new DynamoDbStore({
      client: localDocumentClient(lossy),
      tableName: db.idempotencyTable,
      leaseSeconds: 30,
    });
    const key = newKey();
    const claimed = await acquire(s, key);
    const unconditional: EffectItem = { Put: { TableName: db.effectsTable, Item: { pk: key, sk: 'PAYMENT#once' } } };
    await expect(s.commit(claimed, created, [unconditional])).rejects.toThrow('socket hang up');
    expect(wasLost()).toBe(true);
    await s.commit(claimed, created, [unconditional]);
    expect(sent).toBe(2);
    expect(await db.itemsUnder(key)).toBe(1);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
    lossy.destroy();
  });
});

describe('commit with nothing staged', () => {
  let proxy: DynamoDbFaultProxy;
  const proxied: DynamoDBClient[] = [];
  beforeAll(async () => {
    proxy = await startDynamoDbFaultProxy(process.env.DYNAMODB_ENDPOINT!);
  });
  afterAll(async () => {
    for (const client of proxied) client.destroy();
    await proxy?.close();
  });

  /** A store whose requests pass through the fault proxy, with the SDK's default retries unless told otherwise. */
  function throughProxy(options: { clock?: FakeClock; maxAttempts?: number } = {}): DynamoDbStore {
    const client = localClient({
      endpoint: proxy.url,
      ...(options.maxAttempts ? { maxAttempts: options.maxAttempts } : {}),
    });
    proxied.push(client);
    return new DynamoDbStore({
      client: localDocumentClient(client),
      tableName: db.idempotencyTable,
      clock: options.clock ?? new FakeClock(),
      leaseSeconds: 30,
    });
  }
  const outcomes = (key: string) =>
    proxy.requests(engineRequests(db.idempotencyTable).completion(key)).map((request) => request.outcome);

  it('takes its index attributes out and records when it completed', async () => {
    const clock = new FakeClock(Date.now());
    const s = store(clock, { ttlSeconds: 3600 });
    const key = newKey();
    const claimed = await s.claim(key, 'fp', { recoverable: true });
    if (claimed.kind !== 'acquired') throw new Error(`expected to acquire, got ${claimed.kind}`);
    clock.advance(20_000);
    await s.commit(claimed.lease, created);
    const { Item } = await doc.send(
      new GetCommand({ TableName: db.idempotencyTable, Key: { pk: key }, ConsistentRead: true }),
    );
    expect(Item).toMatchObject({ status: RecordStatus.Completed, completedAt: clock.now() });
    expect(Item).not.toHaveProperty('recoverAt');
    expect(Item).not.toHaveProperty('recoveryShard');
  });

  it('tells its own completion by the condition that fails against it when the SDK retries', async () => {
    const s = throughProxy();
    const key = newKey();
    const claimed = await acquire(s, key);
    const lost = proxy.arm({
      match: engineRequests(db.idempotencyTable).completion(key),
      fault: { mode: 'drop-reply' },
      count: 1,
    });
    await s.commit(claimed, created);
    expect(lost.fired()).toBe(1);
    // The retry fails its condition against the completion the first attempt wrote, under our lease token.
    expect(outcomes(key)).toEqual(['dropped', 400]);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
  });

  it('tells its own completion the same way when the caller commits again after the SDK gave up', async () => {
    const s = throughProxy({ maxAttempts: 2 });
    const key = newKey();
    const claimed = await acquire(s, key);
    const lost = proxy.arm({
      match: engineRequests(db.idempotencyTable).completion(key),
      fault: { mode: 'drop-reply' },
      count: 2,
    });
    await expect(s.commit(claimed, created)).rejects.toThrow();
    expect(lost.fired()).toBe(2);
    await s.commit(claimed, created);
    expect(outcomes(key)).toEqual(['dropped', 'dropped', 400]);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
  });

  it('tries again while a transaction on the record is under way', async () => {
    const s = throughProxy();
    const key = newKey();
    const claimed = await acquire(s, key);
    const conflict = proxy.arm({
      match: engineRequests(db.idempotencyTable).completion(key),
      fault: { mode: 'error', error: 'TransactionConflictException' },
      count: 2,
    });
    await s.commit(claimed, created);
    expect(conflict.fired()).toBe(2);
    expect(outcomes(key)).toEqual([400, 400, 200]);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
  });
});

describe('a recoverable record written before unfinished ones lost their expiry', () => {
  it('is recovered, with an expiry already past, and sheds that expiry', async () => {
    const ttlSeconds = 60;
    const clock = new FakeClock(Date.now());
    const s = store(clock, { ttlSeconds });
    const key = newKey();
    const claimed = await s.claim(key, 'fp', { recoverable: true });
    if (claimed.kind !== 'acquired') throw new Error(`expected to acquire, got ${claimed.kind}`);
    await s.release(claimed.lease);
    // What the store wrote before: a released record in the recovery index that also carries the TTL attribute.
    const legacyExpiry = Math.floor(clock.now() / 1000) + ttlSeconds;
    await doc.send(
      new UpdateCommand({
        TableName: db.idempotencyTable,
        Key: { pk: key },
        UpdateExpression: 'SET #expiresAt = :expiresAt',
        ExpressionAttributeNames: { '#expiresAt': RecordAttribute.expiresAt },
        ExpressionAttributeValues: { ':expiresAt': legacyExpiry },
      }),
    );
    clock.advance((ttlSeconds + 1) * 1000);
    expect((await s.findDue({ limit: 1000 })).map((due) => due.key)).toContain(key);
    const late = await s.claim(key, 'fp', { recoverable: true });
    if (late.kind !== 'acquired') throw new Error(`expected to acquire, got ${late.kind}`);
    expect(late.lease.downstreamKey).toBe(claimed.lease.downstreamKey);
    const { Item } = await doc.send(
      new GetCommand({ TableName: db.idempotencyTable, Key: { pk: key }, ConsistentRead: true }),
    );
    expect(Item).not.toHaveProperty(RecordAttribute.expiresAt);
  });
});
