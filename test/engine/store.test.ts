import { randomUUID } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { EffectConditionFailedError, LeaseLostError, ResponseTooLargeError } from '../../lib/engine/errors';
import { scopedKey } from '../../lib/engine/key';
import { type Lease, RecordStatus, type StoredResponse } from '../../lib/engine/record';
import { type EffectItem, IdempotencyStore } from '../../lib/engine/store';
import { localClient, localDocumentClient, testDatabase } from '../support/dynamodb';
import { type DynamoDbFaultProxy, startDynamoDbFaultProxy } from '../support/dynamodb-fault-proxy';
import { engineRequests } from '../support/engine-requests';
import { FakeClock } from '../support/fake-clock';

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
  new IdempotencyStore({ client: doc, tableName: db.idempotencyTable, clock, leaseSeconds: 30, ...options });

/** One payment row per operation: the witness for "the effect happened once". */
const paymentRow = (pk: string, id: string): EffectItem => ({
  Put: {
    TableName: db.paymentsTable,
    Item: { pk, sk: `PAYMENT#${id}` },
    ConditionExpression: 'attribute_not_exists(pk)',
  },
});

/** Claims a key that the test expects to be free (or takeable): the lease, or a failed test. */
async function acquire(s: IdempotencyStore, key: string, fp = 'fp'): Promise<Lease> {
  const outcome = await s.claim(key, fp);
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

describe('claim', () => {
  it('lets exactly one of 50 concurrent claims win, and exactly one effect commit', async () => {
    const key = newKey();
    const s = store();
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const outcome = await s.claim(key, 'fp');
        if (outcome.kind === 'acquired') await s.commit(outcome.lease, created, [paymentRow(key, `p${i}`)]);
        return outcome.kind;
      }),
    );
    expect(outcomes.filter((kind) => kind === 'acquired')).toHaveLength(1);
    expect(outcomes.filter((kind) => kind !== 'acquired' && kind !== 'in_flight' && kind !== 'replay')).toEqual([]);
    expect(await db.itemsUnder(key)).toBe(1);
  });

  it('replays a completed record in one round trip', async () => {
    const key = newKey();
    const s = store();
    const first = await acquire(s, key);
    await s.commit(first, created);
    requests.reset();
    const replay = await s.claim(key, 'fp');
    expect(replay).toMatchObject({ kind: 'replay', response: created });
    expect(requests.sent).toEqual(['PutItemCommand']);
  });

  it('costs one request for a first claim and one for an in-flight duplicate', async () => {
    const key = newKey();
    const s = store();
    requests.reset();
    expect((await s.claim(key, 'fp')).kind).toBe('acquired');
    expect((await s.claim(key, 'fp')).kind).toBe('in_flight');
    expect(requests.sent).toEqual(['PutItemCommand', 'PutItemCommand']);
  });

  it('reports a mismatch for the same key with another fingerprint, in flight or completed', async () => {
    const key = newKey();
    const s = store();
    const first = await acquire(s, key);
    expect((await s.claim(key, 'other')).kind).toBe('mismatch');
    await s.commit(first, created);
    expect((await s.claim(key, 'other')).kind).toBe('mismatch');
  });

  it('keeps two accounts using the same client key apart', async () => {
    const clientKey = randomUUID();
    const s = store();
    const a = scopedKey({ accountId: 'acct_a', operation: 'POST /payments', key: clientKey });
    const b = scopedKey({ accountId: 'acct_b', operation: 'POST /payments', key: clientKey });
    const claimA = await acquire(s, a);
    await s.commit(claimA, created);
    const claimB = await s.claim(b, 'other-body');
    expect(claimB.kind).toBe('acquired');
    if (claimB.kind === 'acquired') expect(claimB.lease.downstreamKey).not.toBe(claimA.downstreamKey);
  });

  it('treats a record past its expiry as new, with a new downstream key, even before TTL deletes it', async () => {
    const clock = new FakeClock();
    const s = store(clock, { ttlSeconds: 60 });
    const key = newKey();
    const first = await acquire(s, key);
    await s.commit(first, created);
    clock.advance(61_000);
    const again = await s.claim(key, 'a different body is fine after expiry');
    expect(again.kind).toBe('acquired');
    if (again.kind === 'acquired') {
      expect(again.lease.downstreamKey).not.toBe(first.downstreamKey);
      expect(again.lease.takeover).toBe(false);
    }
  });

  it('waits for an in-flight original when asked, and replays its result', async () => {
    const key = newKey();
    const s = store(new FakeClock());
    const first = await acquire(s, key);
    setTimeout(() => void s.commit(first, created), 150);
    const waited = await s.claim(key, 'fp', { waitMs: 3000 });
    expect(waited).toMatchObject({ kind: 'replay', response: created });
  });

  it('stops waiting at its bound and reports in flight', async () => {
    const key = newKey();
    const s = store();
    await s.claim(key, 'fp');
    const started = Date.now();
    expect((await s.claim(key, 'fp', { waitMs: 300 })).kind).toBe('in_flight');
    // The owner never finishes (its clock stands still): only the bound ends the wait, long before this.
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe('a write whose reply is lost', () => {
  /** Lets the first request of the given command reach DynamoDB, then loses its reply, so the SDK retries it. */
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

  it('recognizes its own claim when the SDK retries a put that already landed', async () => {
    const { client: lossy, wasLost } = loseFirstReply('PutItemCommand');
    const s = new IdempotencyStore({
      client: localDocumentClient(lossy),
      tableName: db.idempotencyTable,
      leaseSeconds: 30,
    });
    const outcome = await s.claim(newKey(), 'fp');
    expect(wasLost()).toBe(true);
    expect(outcome.kind).toBe('acquired');
    lossy.destroy();
  });

  it('recognizes its own takeover when the SDK retries an update that already landed', async () => {
    const clock = new FakeClock();
    const key = newKey();
    const first = await acquire(store(clock), key);
    clock.advance(30_001);
    const { client: lossy, wasLost } = loseFirstReply('UpdateItemCommand');
    const s = new IdempotencyStore({
      client: localDocumentClient(lossy),
      tableName: db.idempotencyTable,
      clock,
      leaseSeconds: 30,
    });
    const outcome = await s.claim(key, 'fp');
    expect(wasLost()).toBe(true);
    expect(outcome).toMatchObject({
      kind: 'acquired',
      lease: { takeover: true, downstreamKey: first.downstreamKey },
    });
    lossy.destroy();
  });

  it('commits once when the caller retries a commit whose reply was lost after the SDK gave up', async () => {
    // The SDK fills in a ClientRequestToken of its own and reuses it across its own retries; a caller that calls
    // commit again would get a new one and fail the (already satisfied) condition. The lease token as the token
    // makes the second call a success too.
    const { client: lossy, wasLost } = loseFirstReply('TransactWriteItemsCommand', 1);
    const s = new IdempotencyStore({
      client: localDocumentClient(lossy),
      tableName: db.idempotencyTable,
      leaseSeconds: 30,
    });
    const key = newKey();
    const claimed = await acquire(s, key);
    await expect(s.commit(claimed, created, [paymentRow(key, 'once')])).rejects.toThrow('socket hang up');
    expect(wasLost()).toBe(true);
    await s.commit(claimed, created, [paymentRow(key, 'once')]);
    expect(await db.itemsUnder(key)).toBe(1);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay' });
    lossy.destroy();
  });
});

describe('takeover', () => {
  it('gives an expired lease to exactly one of two concurrent takers, keeping the downstream key', async () => {
    const clock = new FakeClock();
    const s = store(clock);
    const key = newKey();
    const dead = await acquire(s, key);
    clock.advance(30_001);
    const [one, two] = await Promise.all([s.claim(key, 'fp'), s.claim(key, 'fp')]);
    const winners = [one, two].filter((outcome) => outcome.kind === 'acquired');
    expect(winners).toHaveLength(1);
    expect([one, two].map((o) => o.kind).sort()).toEqual(['acquired', 'in_flight']);
    const winner = winners[0];
    if (winner?.kind !== 'acquired') throw new Error('expected a winner');
    expect(winner.lease.takeover).toBe(true);
    expect(winner.lease.downstreamKey).toBe(dead.downstreamKey);
    expect(winner.lease.leaseToken).not.toBe(dead.leaseToken);
    expect(winner.lease.attempt).toBe(2);
  });

  it('rejects the stale owner’s commit after a takeover and writes none of its effects', async () => {
    const clock = new FakeClock();
    const s = store(clock);
    const key = newKey();
    const stale = await acquire(s, key);
    clock.advance(30_001);
    const current = await acquire(s, key);

    await expect(s.commit(stale, created, [paymentRow(key, 'stale')])).rejects.toBeInstanceOf(LeaseLostError);
    expect(await db.itemsUnder(key)).toBe(0);

    await s.commit(current, created, [paymentRow(key, 'current')]);
    expect(await db.itemsUnder(key)).toBe(1);
    await expect(s.commit(stale, created, [paymentRow(key, 'late')])).rejects.toBeInstanceOf(LeaseLostError);
    expect(await db.itemsUnder(key)).toBe(1);
  });

  it('tells the stale owner, as a typed field, the record that fenced it', async () => {
    const clock = new FakeClock();
    const s = store(clock);
    const key = newKey();
    const stale = await acquire(s, key);
    clock.advance(30_001);
    const current = await acquire(s, key);

    const error = await s.commit(stale, created, [paymentRow(key, 'stale')]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect((error as LeaseLostError).record).toMatchObject({
      key,
      status: RecordStatus.InProgress,
      leaseToken: current.leaseToken,
      attempt: 2,
    });
  });

  it('lets a slow owner whose lease ran out still commit when nobody took over', async () => {
    const clock = new FakeClock();
    const s = store(clock);
    const key = newKey();
    const slow = await acquire(s, key);
    clock.advance(45_000);
    await s.commit(slow, created, [paymentRow(key, 'slow')]);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay' });
  });
});

describe('release', () => {
  it('frees the key for a retry that keeps the fingerprint check and the downstream key', async () => {
    const s = store();
    const key = newKey();
    const first = await acquire(s, key);
    expect(await s.release(first)).toBe(true);
    expect((await s.claim(key, 'other')).kind).toBe('mismatch');
    const retry = await s.claim(key, 'fp');
    expect(retry.kind).toBe('acquired');
    if (retry.kind === 'acquired') {
      expect(retry.lease.downstreamKey).toBe(first.downstreamKey);
      expect(retry.lease.takeover).toBe(true);
    }
  });

  it('never touches a claim it does not own', async () => {
    const clock = new FakeClock();
    const s = store(clock);
    const key = newKey();
    const stale = await acquire(s, key);
    clock.advance(30_001);
    const current = await acquire(s, key);
    expect(await s.release(stale)).toBe(false);
    expect((await s.claim(key, 'fp')).kind).toBe('in_flight');
    const { Item } = await doc.send(new GetCommand({ TableName: db.idempotencyTable, Key: { pk: key } }));
    expect(Item).toMatchObject({ status: RecordStatus.InProgress, leaseToken: current.leaseToken });
  });

  it('makes the Powertools duplicate-deletes-the-original race impossible', async () => {
    // Powertools 2.35: a duplicate that is turned away deletes the in-progress record it never owned, and a third
    // request then runs the handler again. Here a duplicate holds no lease, so it has nothing to release, and the
    // original keeps its claim through any number of duplicates.
    const s = store();
    const key = newKey();
    const original = await acquire(s, key);
    const duplicates = await Promise.all(Array.from({ length: 5 }, () => s.claim(key, 'fp')));
    expect(duplicates.map((d) => d.kind)).toEqual(Array(5).fill('in_flight'));
    const third = await s.claim(key, 'fp');
    expect(third.kind).toBe('in_flight');
    await s.commit(original, created, [paymentRow(key, 'once')]);
    expect(await db.itemsUnder(key)).toBe(1);
  });

  it('cannot release a completed record', async () => {
    const s = store();
    const key = newKey();
    const first = await acquire(s, key);
    await s.commit(first, created);
    expect(await s.release(first)).toBe(false);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay' });
  });
});

describe('commit', () => {
  it('writes neither the effect nor the completion when an effect condition fails', async () => {
    const s = store();
    const key = newKey();
    const first = await acquire(s, key);
    const blocked: EffectItem = {
      ConditionCheck: {
        TableName: db.paymentsTable,
        Key: { pk: `missing-${randomUUID()}`, sk: 'x' },
        ConditionExpression: 'attribute_exists(pk)',
      },
    };
    const error = await s.commit(first, created, [paymentRow(key, 'p'), blocked]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EffectConditionFailedError);
    expect((error as EffectConditionFailedError).index).toBe(1);
    expect(await db.itemsUnder(key)).toBe(0);
    expect((await s.claim(key, 'fp')).kind).toBe('in_flight');
  });

  it('refuses a response too large for an item, writing nothing', async () => {
    const s = store();
    const key = newKey();
    const first = await acquire(s, key);
    const huge = { ...created, body: 'x'.repeat(400 * 1024) };
    await expect(s.commit(first, huge, [paymentRow(key, 'p')])).rejects.toBeInstanceOf(ResponseTooLargeError);
    expect(await db.itemsUnder(key)).toBe(0);
  });

  it('is one TransactWriteItems round trip when effects are staged', async () => {
    const s = store();
    const key = newKey();
    const first = await acquire(s, key);
    requests.reset();
    await s.commit(first, created, [paymentRow(key, 'p')]);
    expect(requests.sent).toEqual(['TransactWriteItemsCommand']);
  });
});

describe('commit with nothing staged', () => {
  // The work lives in another system (the common case for an idempotent call to an outside API): the completion is
  // the only write, and it goes alone, as one conditional UpdateItem.
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
  function throughProxy(options: { clock?: FakeClock; maxAttempts?: number } = {}): IdempotencyStore {
    const client = localClient({
      endpoint: proxy.url,
      ...(options.maxAttempts ? { maxAttempts: options.maxAttempts } : {}),
    });
    proxied.push(client);
    return new IdempotencyStore({
      client: localDocumentClient(client),
      tableName: db.idempotencyTable,
      clock: options.clock ?? new FakeClock(),
      leaseSeconds: 30,
    });
  }
  const outcomes = (key: string) =>
    proxy.requests(engineRequests(db.idempotencyTable).completion(key)).map((request) => request.outcome);

  it('is one conditional UpdateItem, not a transaction', async () => {
    const s = store();
    const key = newKey();
    const first = await acquire(s, key);
    requests.reset();
    await s.commit(first, created);
    expect(requests.sent).toEqual(['UpdateItemCommand']);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
  });

  it('completes the record as a transaction would: out of the recovery index, kept a full TTL from the commit', async () => {
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
    expect(Item).toMatchObject({
      status: RecordStatus.Completed,
      leaseToken: claimed.lease.leaseToken,
      response: created,
      completedAt: clock.now(),
      expiresAt: Math.ceil(clock.now() / 1000) + 3600,
    });
    expect(Item).not.toHaveProperty('recoverAt');
    expect(Item).not.toHaveProperty('recoveryShard');
  });

  it('recognises its own completion when the SDK retries an update whose reply was lost', async () => {
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

  it('recognises its own completion when the caller commits again after the SDK gave up', async () => {
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

  it('rejects a stale owner, even once the owner that took over has completed the record', async () => {
    const clock = new FakeClock();
    const s = store(clock);
    const key = newKey();
    const stale = await acquire(s, key);
    clock.advance(30_001);
    const current = await acquire(s, key);

    await expect(s.commit(stale, created)).rejects.toBeInstanceOf(LeaseLostError);
    await s.commit(current, { ...created, body: '{"id":"pay_current"}' });
    // Completed, but under another lease token: not this owner's completion.
    const late = await s.commit(stale, created).catch((error: unknown) => error);
    expect(late).toBeInstanceOf(LeaseLostError);
    expect((late as LeaseLostError).record).toMatchObject({ leaseToken: current.leaseToken });
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: { body: '{"id":"pay_current"}' } });
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

describe('claimAndCommit (one-shot local db.paymentsTable)', () => {
  const build = (key: string, id: string) => async () => ({ response: created, effects: [paymentRow(key, id)] });

  it('commits claim, effect and completion in one round trip', async () => {
    const s = store();
    const key = newKey();
    requests.reset();
    expect((await s.claimAndCommit(key, 'fp', build(key, 'p1'))).kind).toBe('committed');
    expect(requests.sent).toEqual(['TransactWriteItemsCommand']);
    expect(await db.itemsUnder(key)).toBe(1);
  });

  it('answers a duplicate from the cancellation reasons in that same round trip', async () => {
    const s = store();
    const key = newKey();
    await s.claimAndCommit(key, 'fp', build(key, 'p1'));
    requests.reset();
    expect(await s.claimAndCommit(key, 'fp', build(key, 'p2'))).toMatchObject({ kind: 'replay', response: created });
    expect(requests.sent).toEqual(['TransactWriteItemsCommand']);
    expect((await s.claimAndCommit(key, 'other', build(key, 'p3'))).kind).toBe('mismatch');
    expect(await db.itemsUnder(key)).toBe(1);
  });

  it('makes exactly one effect out of 50 concurrent attempts', async () => {
    const s = store();
    const key = newKey();
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, (_, i) => s.claimAndCommit(key, 'fp', build(key, `p${i}`))),
    );
    expect(outcomes.filter((o) => o.kind === 'committed')).toHaveLength(1);
    expect(outcomes.every((o) => o.kind === 'committed' || o.kind === 'replay')).toBe(true);
    expect(await db.itemsUnder(key)).toBe(1);
  });

  it('completes a released record, reusing its downstream key', async () => {
    const s = store();
    const key = newKey();
    const claimed = await acquire(s, key);
    await s.release(claimed);
    const outcome = await s.claimAndCommit(key, 'fp', build(key, 'p1'));
    expect(outcome).toMatchObject({ kind: 'committed', downstreamKey: claimed.downstreamKey });
  });

  it('reports in flight while a two-phase owner holds the key, writing nothing', async () => {
    const s = store();
    const key = newKey();
    await s.claim(key, 'fp');
    expect((await s.claimAndCommit(key, 'fp', build(key, 'p1'))).kind).toBe('in_flight');
    expect(await db.itemsUnder(key)).toBe(0);
  });
});
