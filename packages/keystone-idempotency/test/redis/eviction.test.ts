import { randomUUID } from 'node:crypto';
import { type Lease, type StoredResponse, scopedKey } from '../../src/engine';
import type { RedisStore } from '../../src/redis';
import { testRedis } from '../support/redis';

/**
 * Memory pressure on a real redis-server running a `volatile-*` policy, which a store with `evictionCheck: 'volatile'`
 * accepts: Redis evicts keys that carry a TTL, so nothing unfinished may carry one. A claim evicted while its owner
 * works is a duplicate that acquires the key under a new downstream key: the work done twice.
 */
const redis = testRedis();
const created: StoredResponse = { statusCode: 201, body: '{"id":"pay_1"}', headers: {} };
const newKey = () => scopedKey({ accountId: 'acct_eviction', operation: 'POST /payments', key: randomUUID() });

async function acquire(s: RedisStore, key: string, recoverable: boolean): Promise<Lease> {
  const outcome = await s.claim(key, 'fp', { recoverable });
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

async function evictedKeys(): Promise<number> {
  return Number(/evicted_keys:(\d+)/.exec(await redis.direct.info('stats'))?.[1] ?? 0);
}

/**
 * Fills the server past a limit just above what it holds now with keys that carry a TTL (a cache's keys, an hour
 * each), until Redis has evicted many times more keys than the store wrote.
 */
async function pressure(): Promise<number> {
  const used = Number(/used_memory:(\d+)/.exec(await redis.direct.info('memory'))?.[1]);
  await redis.direct.configSet('maxmemory', String(used + 512 * 1024));
  const before = await evictedKeys();
  const value = 'x'.repeat(4096);
  for (let batch = 0; batch < 40 && (await evictedKeys()) - before < 1000; batch++) {
    await Promise.all(Array.from({ length: 50 }, () => redis.direct.set(`cache:${randomUUID()}`, value, { EX: 3600 })));
  }
  return (await evictedKeys()) - before;
}

describe.each(['volatile-ttl', 'volatile-lru'])('under maxmemory-policy %s and memory pressure', (policy) => {
  beforeAll(() => redis.direct.configSet('maxmemory-policy', policy));
  afterAll(async () => {
    await redis.direct.configSet('maxmemory', '0');
    await redis.direct.configSet('maxmemory-policy', 'noeviction');
  });

  it('an in-progress claim, recoverable or not, is never evicted while its owner works: a duplicate never acquires it', async () => {
    const s = redis.store({ evictionCheck: 'volatile', ttlSeconds: 60 });
    const plain = newKey();
    const recoverable = newKey();
    const leases = [await acquire(s, plain, false), await acquire(s, recoverable, true)];
    expect(await pressure()).toBeGreaterThanOrEqual(1000);
    for (const key of [plain, recoverable]) {
      expect(await redis.direct.exists(s.recordKey(key))).toBe(1);
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'in_flight' }); // the duplicate
    }
    // The pressure over, the owners finish: each completion lands, and from then on the record carries its TTL like
    // any cache key (evictable under this policy: what 'volatile' accepts).
    await redis.direct.configSet('maxmemory', '0');
    for (const lease of leases) await s.commit(lease, created);
    for (const key of [plain, recoverable]) {
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
      expect(await redis.direct.pTTL(s.recordKey(key))).toBeGreaterThan(50_000);
    }
    await redis.direct.flushAll();
  });
});
