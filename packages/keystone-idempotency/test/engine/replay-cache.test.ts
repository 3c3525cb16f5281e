import { randomUUID } from 'node:crypto';
import { ConfigurationError, LeaseLostError } from '../../src/engine/errors';
import { makeIdempotent } from '../../src/engine/make-idempotent';
import { RecordStatus, type StoredResponse } from '../../src/engine/record';
import { ReplayCache } from '../../src/engine/replay-cache';
import { FakeClock } from '../support/fake-clock';
import { storeHarnesses } from '../support/stores';

const TTL_SECONDS = 3600;

const key = () => `acct|POST /orders|${randomUUID()}`;
const response = (body = '{"id":"ord_1"}'): StoredResponse => ({
  statusCode: 201,
  body,
  headers: { 'Content-Type': 'application/json' },
});

/** Claims and commits a key through `cache`, as an adapter does: the completion is then in the cache. */
async function complete(cache: ReplayCache<unknown>, k: string, print = 'print-a', stored = response()) {
  const claimed = await cache.claim(k, print);
  if (claimed.kind !== 'acquired') throw new Error(`expected to acquire ${k}, got ${claimed.kind}`);
  await cache.commit(claimed.lease, stored);
  return claimed.lease;
}

describe.each(storeHarnesses)('ReplayCache in front of the store on %s', (_name, harness) => {
  const h = harness();
  /** The round trips spent since the last look, as a count: 0 is what a cache hit must cost. */
  const db = {
    requests: {
      reset: () => h.roundTrips.reset(),
      get sent(): number {
        return h.roundTrips.count;
      },
    },
  };

  /** A store and the cache in front of it, on one clock (as they are in a function: both on the system clock). */
  function cachedStore(options: { maxEntries?: number; maxBytes?: number } = {}) {
    // On a whole second, so the store's expiry and the cache's (rounded down to a second) agree.
    const clock = new FakeClock(Math.floor(Date.now() / 1000) * 1000);
    const store = h.store({ clock, leaseSeconds: 30, ttlSeconds: TTL_SECONDS });
    return { clock, store, cache: new ReplayCache(store, { ...options, clock }) };
  }

  it('answers a replay of an operation this function committed with no database request', async () => {
    const { cache } = cachedStore();
    const k = key();
    const lease = await complete(cache, k);

    db.requests.reset();
    const replay = await cache.claim(k, 'print-a');
    expect(db.requests.sent).toBe(0);
    expect(replay).toMatchObject({ kind: 'replay', response: response() });
    expect(replay.kind === 'replay' && replay.record).toMatchObject({
      key: k,
      status: RecordStatus.Completed,
      downstreamKey: lease.downstreamKey,
      attempt: 1,
      createdAt: lease.createdAt,
    });
  });

  it('answers another fingerprint under a cached key with a mismatch, still with no request', async () => {
    const { cache } = cachedStore();
    const k = key();
    await complete(cache, k);

    db.requests.reset();
    const outcome = await cache.claim(k, 'print-b');
    expect(db.requests.sent).toBe(0);
    expect(outcome).toMatchObject({ kind: 'mismatch', record: { key: k, fingerprint: 'print-a' } });
  });

  it('learns a record another function completed from its first replay, and answers the next from memory', async () => {
    const { store, cache, clock } = cachedStore();
    const k = key();
    const claimed = await store.claim(k, 'print-a');
    if (claimed.kind !== 'acquired') throw new Error('expected to acquire');
    await store.commit(claimed.lease, response());

    db.requests.reset();
    expect((await cache.claim(k, 'print-a')).kind).toBe('replay');
    expect(db.requests.sent).toBe(1);
    clock.advance(1000);
    db.requests.reset();
    expect((await cache.claim(k, 'print-a')).kind).toBe('replay');
    expect(db.requests.sent).toBe(0);
  });

  it('never serves a record past its expiry: the key is then a new operation, claimed in the database', async () => {
    const { cache, clock } = cachedStore();
    const k = key();
    const first = await complete(cache, k);

    clock.advance(TTL_SECONDS * 1000 - 2000);
    db.requests.reset();
    expect((await cache.claim(k, 'print-a')).kind).toBe('replay');
    expect(db.requests.sent).toBe(0);

    clock.advance(2000);
    const after = await cache.claim(k, 'print-a');
    expect(db.requests.sent).toBe(1);
    expect(after.kind).toBe('acquired');
    // A new generation: a new downstream key, so an outside system does not replay the old effect for it.
    expect(after.kind === 'acquired' && after.lease.downstreamKey).not.toBe(first.downstreamKey);
    expect(cache.size).toBe(0);
  });

  it('keeps no record that is not completed: a duplicate in flight, or after a release, asks the database each time', async () => {
    const { cache } = cachedStore();
    const k = key();
    const claimed = await cache.claim(k, 'print-a');
    if (claimed.kind !== 'acquired') throw new Error('expected to acquire');

    for (let i = 0; i < 2; i++) {
      db.requests.reset();
      expect((await cache.claim(k, 'print-a')).kind).toBe('in_flight');
      expect(db.requests.sent).toBe(1);
    }
    // A mismatch against an unfinished record is not kept either: the record can still change.
    expect((await cache.claim(k, 'print-b')).kind).toBe('mismatch');
    await cache.release(claimed.lease);
    db.requests.reset();
    expect((await cache.claim(k, 'print-a')).kind).toBe('acquired');
    expect(db.requests.sent).toBeGreaterThan(0);
    expect(cache.size).toBe(0);
  });

  it('caches nothing for a commit that was fenced', async () => {
    const { cache, store, clock } = cachedStore();
    const k = key();
    const stale = await cache.claim(k, 'print-a');
    if (stale.kind !== 'acquired') throw new Error('expected to acquire');
    clock.advance(30_001);
    const retry = await store.claim(k, 'print-a');
    if (retry.kind !== 'acquired') throw new Error('expected the retry to take over');

    await expect(cache.commit(stale.lease, response('{"by":"stale"}'))).rejects.toBeInstanceOf(LeaseLostError);
    expect(cache.size).toBe(0);
    await store.commit(retry.lease, response('{"by":"retry"}'));
    expect(await cache.claim(k, 'print-a')).toMatchObject({ kind: 'replay', response: { body: '{"by":"retry"}' } });
  });

  it('holds at most maxEntries records, dropping the least recently used', async () => {
    const { cache } = cachedStore({ maxEntries: 2 });
    const [a, b, c] = [key(), key(), key()];
    await complete(cache, a);
    await complete(cache, b);
    await cache.claim(a, 'print-a'); // a is now the most recently used
    await complete(cache, c);
    expect(cache.size).toBe(2);

    db.requests.reset();
    await cache.claim(a, 'print-a');
    await cache.claim(c, 'print-a');
    expect(db.requests.sent).toBe(0);
    expect((await cache.claim(b, 'print-a')).kind).toBe('replay');
    expect(db.requests.sent).toBe(1);
  });

  it('holds at most maxBytes of responses, and never one larger than that', async () => {
    const { cache } = cachedStore({ maxBytes: 4000 });
    const big = key();
    await complete(cache, big, 'print-a', response('x'.repeat(3000)));
    expect(cache.size).toBe(0);

    const [a, b] = [key(), key()];
    await complete(cache, a, 'print-a', response('a'.repeat(1100)));
    await complete(cache, b, 'print-a', response('b'.repeat(1100)));
    // Each weighs about 2.2 KB as UTF-16: the first is dropped to make room for the second.
    expect(cache.size).toBe(1);
    db.requests.reset();
    await cache.claim(b, 'print-a');
    expect(db.requests.sent).toBe(0);
  });

  it('answers a one-shot claimAndCommit duplicate from memory once it was replayed', async () => {
    const { cache } = cachedStore();
    const k = key();
    const build = async () => ({ response: response(), effects: [] });
    expect((await cache.claimAndCommit(k, 'print-a', build)).kind).toBe('committed');
    expect((await cache.claimAndCommit(k, 'print-a', build)).kind).toBe('replay');
    db.requests.reset();
    expect((await cache.claimAndCommit(k, 'print-a', build)).kind).toBe('replay');
    expect((await cache.claimAndCommit(k, 'print-b', build)).kind).toBe('mismatch');
    expect(db.requests.sent).toBe(0);
  });

  it('serves every adapter it is given to: a warm makeIdempotent replays without the database', async () => {
    const { cache } = cachedStore();
    let runs = 0;
    const book = makeIdempotent(
      async (order: { orderId: string }) => {
        runs++;
        return { shipmentId: `shp_${order.orderId}` };
      },
      { store: cache, name: 'book-shipment', key: (order) => order.orderId },
    );
    const order = { orderId: randomUUID() };
    const first = await book(order);
    db.requests.reset();
    expect(await book(order)).toEqual(first);
    expect(db.requests.sent).toBe(0);
    expect(runs).toBe(1);
  });

  it('refuses a size it cannot keep', () => {
    const { store } = cachedStore();
    expect(() => new ReplayCache(store, { maxEntries: 0 })).toThrow(ConfigurationError);
    expect(() => new ReplayCache(store, { maxBytes: 0 })).toThrow(ConfigurationError);
  });
});
