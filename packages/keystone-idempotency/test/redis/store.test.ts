import { randomUUID } from 'node:crypto';
import { startRedisLocal } from '@keystone-idempotency/local-aws/redis-local';
import {
  ConfigurationError,
  EffectConditionFailedError,
  EffectKindError,
  type Lease,
  makeIdempotent,
  type StoredResponse,
  scopedKey,
} from '../../src/engine';
import { RedisStore } from '../../src/redis';
import { FakeClock } from '../support/fake-clock';
import { redisClient, redisEngineCommands, testRedis } from '../support/redis';

/**
 * What is particular to Redis: the TTL a record carries (none in the recovery set), the eviction policy the store
 * refuses, the hash slot its effects must share, and a commit's effects all-or-nothing in its script. The protocol
 * itself is the contract suite's (store-contract.test.ts); lost replies and restarts are faults.test.ts.
 */
const redis = testRedis();
const created: StoredResponse = { statusCode: 201, body: '{"id":"pay_1"}', headers: {} };
const newKey = () => scopedKey({ accountId: 'acct_redis', operation: 'POST /payments', key: randomUUID() });

async function acquire(s: RedisStore, key: string, recoverable = false): Promise<Lease> {
  const outcome = await s.claim(key, 'fp', { recoverable });
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

describe('expiry', () => {
  it("gives a completed record the key's own TTL: the time its expiry leaves on the engine's clock", async () => {
    // A clock a year behind the server's: an absolute expiry would have deleted the record on the spot.
    const clock = new FakeClock(Date.now() - 365 * 24 * 3600_000);
    const s = redis.store({ clock, ttlSeconds: 3600 });
    const key = newKey();
    await s.commit(await acquire(s, key), created);
    const ttl = await redis.direct.pTTL(s.recordKey(key));
    expect(ttl).toBeGreaterThan(3590_000);
    expect(ttl).toBeLessThanOrEqual(3601_000);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
  });

  it('keeps an unfinished recoverable record with no TTL, in the recovery set, until it is finished', async () => {
    const s = redis.store({ ttlSeconds: 60 });
    const key = newKey();
    const lease = await acquire(s, key, true);
    expect(await redis.direct.pTTL(s.recordKey(key))).toBe(-1); // no TTL
    expect(await redis.direct.zScore(s.recoverySetKey, key)).not.toBeNull();
    await s.release(lease);
    expect(await redis.direct.pTTL(s.recordKey(key))).toBe(-1);
    const again = await acquire(s, key, true);
    await s.abandon(again);
    expect(await redis.direct.zScore(s.recoverySetKey, key)).toBeNull();
    expect(await redis.direct.pTTL(s.recordKey(key))).toBeGreaterThan(50_000); // a full TTL from the abandonment
  });

  it('keeps an in-progress record that is not recoverable with no TTL too, listed by its expiry until it is finished', async () => {
    const s = redis.store({ ttlSeconds: 60 });
    const key = newKey();
    const lease = await acquire(s, key);
    expect(await redis.direct.pTTL(s.recordKey(key))).toBe(-1); // nothing a volatile-* policy can evict
    expect(await redis.direct.zScore(s.recoverySetKey, key)).toBeNull();
    const record = await s.get(key);
    expect(await redis.direct.zScore(redis.key('expiry'), key)).toBe(record?.expiresAt);
    await s.release(lease); // finished: the TTL its expiry leaves, off the list
    expect(await redis.direct.pTTL(s.recordKey(key))).toBeGreaterThan(50_000);
    expect(await redis.direct.zScore(redis.key('expiry'), key)).toBeNull();
  });

  it('deletes an in-progress record nobody came back for once its expiry has passed, at a later claim', async () => {
    const clock = new FakeClock(Date.now());
    const s = redis.store({ clock, ttlSeconds: 60 });
    const forgotten = newKey();
    const recoverable = newKey();
    await acquire(s, forgotten);
    await acquire(s, recoverable, true);
    clock.advance(59_000);
    await acquire(s, newKey()); // not yet past: kept
    expect(await redis.direct.exists(s.recordKey(forgotten))).toBe(1);
    clock.advance(2_000); // past expiresAt (whole seconds, rounded up)
    expect(await s.get(forgotten)).toBeUndefined(); // absent to every read from its expiry on
    const later = newKey();
    await acquire(s, later);
    expect(await redis.direct.exists(s.recordKey(forgotten))).toBe(0); // and gone from Redis at the next claim
    expect(await redis.direct.zScore(redis.key('expiry'), forgotten)).toBeNull();
    // A recoverable one is never swept, however old: recovery has yet to find it.
    expect(await redis.direct.exists(s.recordKey(recoverable))).toBe(1);
    expect(await redis.direct.zScore(redis.key('expiry'), later)).not.toBeNull();
  });

  it('sweeps the record of a key with braces, separators and a character outside the BMP, and only that one', async () => {
    const clock = new FakeClock(Date.now());
    const s = redis.store({ clock, ttlSeconds: 60 });
    const odd = (suffix: string) =>
      scopedKey({ accountId: 'acct_{redis}', operation: 'POST /a:b', key: `{x}:record:🦄|${suffix}`.padEnd(255, 'é') });
    const forgotten = odd('1');
    const neighbour = odd('2');
    await acquire(s, forgotten);
    clock.advance(61_000);
    await acquire(s, neighbour); // sweeps the forgotten one
    expect(await redis.direct.exists(s.recordKey(forgotten))).toBe(0);
    expect(await s.get(neighbour)).toMatchObject({ status: 'IN_PROGRESS' });
  });

  it('N duplicates racing for a lapsed claim: exactly one owner, and no sweep deletes the new owner', async () => {
    const clock = new FakeClock(Date.now());
    const s = redis.store({ clock, ttlSeconds: 60 });
    const key = newKey();
    const first = await acquire(s, key);
    clock.advance(61_000);
    const others = Array.from({ length: 10 }, newKey);
    const outcomes = await Promise.all([
      ...Array.from({ length: 20 }, () => s.claim(key, 'fp')),
      ...others.map((other) => s.claim(other, 'fp')), // each a claim that sweeps
    ]);
    const owners = outcomes.slice(0, 20).filter((outcome) => outcome.kind === 'acquired');
    expect(owners).toHaveLength(1);
    const owner = owners[0]!.kind === 'acquired' ? owners[0]!.lease : undefined;
    expect(owner?.downstreamKey).not.toBe(first.downstreamKey); // past its expiry: a new generation
    expect(await s.get(key)).toMatchObject({ status: 'IN_PROGRESS', leaseToken: owner?.leaseToken });
    await s.commit(owner!, created);
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay' });
  });
});

describe('the eviction policy', () => {
  afterEach(() => redis.direct.configSet('maxmemory-policy', 'noeviction'));

  it.each(['allkeys-lru', 'allkeys-lfu', 'allkeys-random', 'volatile-lru', 'volatile-ttl'])(
    'refuses %s with a ConfigurationError before its first command, and keeps refusing',
    async (policy) => {
      await redis.direct.configSet('maxmemory-policy', policy);
      const client = await redis.newProxiedClient();
      const s = redis.store({ client });
      await expect(s.claim(newKey(), 'fp')).rejects.toThrow(ConfigurationError);
      const refusal = await s.claim(newKey(), 'fp').catch((e: unknown) => e);
      expect((refusal as Error).message).toBe(
        `the Redis server's maxmemory-policy is ${policy}, which can evict the store's records (a completed one lost ` +
          'is work run twice; an unfinished one, work lost): the store needs noeviction',
      );
      // The refusal stands for the client, whatever the server's setting becomes: a new client checks again.
      await redis.direct.configSet('maxmemory-policy', 'noeviction');
      await expect(s.get(newKey())).rejects.toThrow(ConfigurationError);
    },
  );

  it('is checked for each store, not once per client: a default store beside a volatile one is refused', async () => {
    await redis.direct.configSet('maxmemory-policy', 'volatile-lru');
    const client = await redis.newProxiedClient();
    expect((await redis.store({ client, evictionCheck: 'volatile' }).claim(newKey(), 'fp')).kind).toBe('acquired');
    await expect(redis.store({ client }).claim(newKey(), 'fp')).rejects.toThrow(/maxmemory-policy is volatile-lru/);
    // Under another prefix (its own slot, on a cluster another shard): checked on its own as well.
    await expect(redis.store({ client, prefix: `other-${randomUUID()}` }).get(newKey())).rejects.toThrow(
      ConfigurationError,
    );
  });

  it("accepts volatile-* when told to (evictionCheck: 'volatile'), and anything with 'skip'", async () => {
    await redis.direct.configSet('maxmemory-policy', 'volatile-lru');
    const client = await redis.newProxiedClient();
    expect((await redis.store({ client, evictionCheck: 'volatile' }).claim(newKey(), 'fp')).kind).toBe('acquired');
    await redis.direct.configSet('maxmemory-policy', 'allkeys-lru');
    const other = await redis.newProxiedClient();
    expect((await redis.store({ client: other, evictionCheck: 'skip' }).claim(newKey(), 'fp')).kind).toBe('acquired');
  });

  it('refuses allkeys-* though told volatile-* will do, naming what it accepts', async () => {
    await redis.direct.configSet('maxmemory-policy', 'allkeys-lru');
    const client = await redis.newProxiedClient();
    await expect(redis.store({ client, evictionCheck: 'volatile' }).claim(newKey(), 'fp')).rejects.toThrow(
      /maxmemory-policy is allkeys-lru, .*: the store needs noeviction or volatile-\*$/,
    );
  });

  it('reads it on a server whose CONFIG is renamed away (as ElastiCache blocks it): INFO, in a script', async () => {
    const server = await startRedisLocal({
      settings: { 'rename-command': ['CONFIG', ''], 'maxmemory-policy': 'allkeys-lru' },
    });
    const client = await redisClient(server.url);
    try {
      await expect(client.configGet('maxmemory-policy')).rejects.toThrow(/unknown command/i);
      // Its appendfsync can't be read there (durability.test.ts): told the server is vouched for, the store still
      // reads the eviction policy, and refuses this one.
      const s = new RedisStore({ client, leaseSeconds: 30, durability: 'unchecked' });
      await expect(s.claim(newKey(), 'fp')).rejects.toThrow(/maxmemory-policy is allkeys-lru/);
      const skipped = new RedisStore({ client, leaseSeconds: 30, durability: 'unchecked', evictionCheck: 'skip' });
      expect((await skipped.claim(newKey(), 'fp')).kind).toBe('acquired');
    } finally {
      await client.close();
      await server.stop();
    }
  });
});

describe('effects', () => {
  it("are commands on keys of the store's hash slot: another key is refused when staged", async () => {
    const s = redis.store();
    const work = makeIdempotent(
      async (_: { id: string }, idempotency) => {
        idempotency.stage({ set: 'orders:1', value: 'x' } as never);
        return 'done';
      },
      { store: s, name: 'slot', key: (input) => input.id },
    );
    await expect(work({ id: randomUUID() })).rejects.toThrow(EffectKindError);
    expect(() => s.checkEffect({ set: '{other}:orders:1', value: 'x' }, 0)).toThrow(/hash tag/);
    expect(() => s.checkEffect({ set: `${s.recordKey('k')}`, value: 'x' }, 0)).toThrow(/store's own/);
    expect(() => s.checkEffect({ set: s.recoverySetKey, value: 'x' }, 0)).toThrow(/store's own/);
    expect(() => s.checkEffect({ set: redis.key('expiry'), value: 'x' }, 0)).toThrow(/store's own/);
    expect(() => s.effectKey('expiry')).toThrow(ConfigurationError);
    expect(() => s.checkEffect({ incrBy: s.effectKey('n'), by: 0.5 }, 0)).toThrow(EffectKindError);
    expect(() => s.checkEffect({ Put: { TableName: 't', Item: {} } }, 0)).toThrow(EffectKindError);
    expect(() => s.effectKey('recovery')).toThrow(ConfigurationError);
  });

  it('commit all or nothing: a refused incrBy after a set writes neither, and the key stays in progress', async () => {
    const s = redis.store();
    const key = newKey();
    const lease = await acquire(s, key);
    const text = s.effectKey(`text:${randomUUID()}`);
    const written = s.effectKey(`written:${randomUUID()}`);
    await redis.direct.set(text, 'not a number');
    const error = await s
      .commit(lease, created, [
        { set: written, value: 'yes' },
        { incrBy: text, by: 1 },
      ])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EffectConditionFailedError);
    // The refused effect itself, as staged, for the caller's message.
    expect(error).toMatchObject({ index: 1, item: { incrBy: text, by: 1 } });
    expect(await redis.direct.exists(written)).toBe(0);
    expect(await s.get(key)).toMatchObject({ status: 'IN_PROGRESS' });
    await s.commit(lease, created, [
      { set: written, value: 'yes' },
      { incrBy: s.effectKey(`count:${key}`), by: 5 },
      { hset: s.effectKey(`h:${key}`), field: 'a', value: 'b' },
      { require: text },
    ]);
    expect(await redis.direct.get(written)).toBe('yes');
    expect(await redis.direct.get(s.effectKey(`count:${key}`))).toBe('5');
    expect(await redis.direct.hGet(s.effectKey(`h:${key}`), 'a')).toBe('b');
  });
});

describe('commands', () => {
  it('is one script per step, by its SHA-1 once the client has sent it whole', async () => {
    const s = redis.store();
    const key = newKey();
    const lease = await acquire(s, key);
    redis.proxy.reset();
    await s.commit(lease, created, [{ set: s.effectKey(`one:${key}`), value: '1' }]);
    await s.claim(key, 'fp');
    expect(redis.proxy.commands().map((c) => c.args[0])).toEqual(['EVALSHA', 'EVALSHA']);
    expect(redisEngineCommands().commit(key).when(redis.proxy.commands()[0]!)).toBe(true);
  });
});
