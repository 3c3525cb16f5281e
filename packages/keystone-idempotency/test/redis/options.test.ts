import { randomUUID } from 'node:crypto';
import { ConfigurationError, EffectKindError, scopedKey } from '../../src/engine';
import { hashTagOf, RedisStore } from '../../src/redis';
import { testRedis } from '../support/redis';

/**
 * What the Redis store refuses when it is built (a prefix that would split its keys across slots, a count of sendings
 * or a replica wait that can't be met), where its keys live, and the hash tag as Redis Cluster reads it: an effect's
 * key is accepted only when Redis would put it in the store's slot.
 */
const redis = testRedis();
const newKey = () => scopedKey({ accountId: 'acct_redis', operation: 'POST /payments', key: randomUUID() });

/** The EffectKindError `store` refuses `effect` with, at `index`; fails the case if the effect is accepted. */
function refusalOf(store: RedisStore, effect: unknown, index: number): EffectKindError {
  try {
    store.checkEffect(effect, index);
  } catch (error) {
    expect(error).toBeInstanceOf(EffectKindError);
    expect(error).toMatchObject({ index });
    return error as EffectKindError;
  }
  throw new Error(`accepted: ${JSON.stringify(effect)}`);
}

describe('building a Redis store', () => {
  it.each([
    ['empty', ''],
    ['with an opening brace', 'pay{ments'],
    ['with a closing brace', 'pay}ments'],
  ])('refuses a prefix %s, naming it', (_, prefix) => {
    expect(() => redis.store({ prefix })).toThrow(ConfigurationError);
    expect(() => redis.store({ prefix })).toThrow(`must be non-empty, without { or }: got ${JSON.stringify(prefix)}`);
  });

  it.each([0, -1, 1.5, Number.NaN])('refuses attempts: %p', (attempts) => {
    expect(() => redis.store({ attempts })).toThrow(ConfigurationError);
    expect(() => redis.store({ attempts })).toThrow(`attempts must be a positive integer, got ${attempts}`);
  });

  it('takes one sending as the least', () => {
    expect(() => redis.store({ attempts: 1 })).not.toThrow();
  });

  it.each([
    { replicas: 0, timeoutMs: 100 },
    { replicas: 1.5, timeoutMs: 100 },
    { replicas: 1, timeoutMs: 0 },
    { replicas: 1, timeoutMs: 2.5 },
    { replicas: -1, timeoutMs: -1 },
  ])('refuses durability %p', (durability) => {
    expect(() => redis.store({ durability })).toThrow(ConfigurationError);
    expect(() => redis.store({ durability })).toThrow(
      `durability needs a positive whole number of replicas and of timeoutMs, got ${JSON.stringify(durability)}`,
    );
  });

  it('takes one replica and one millisecond as the least', () => {
    expect(() => redis.store({ durability: { replicas: 1, timeoutMs: 1 } })).not.toThrow();
  });
});

describe('a client that sends scripts only (no sendCommand)', () => {
  it("is refused with durability: { replicas, timeoutMs }, which sends WAIT, before the store's first write", async () => {
    const prefix = `scripts-only-${randomUUID()}`;
    const direct = redis.direct;
    const scriptsOnly = {
      eval: (script: string, options: { keys: string[]; arguments: string[] }) => direct.eval(script, options),
      evalSha: (sha: string, options: { keys: string[]; arguments: string[] }) => direct.evalSha(sha, options),
    };
    const s = new RedisStore({
      client: scriptsOnly,
      prefix,
      leaseSeconds: 30,
      durability: { replicas: 1, timeoutMs: 100 },
    });
    await expect(s.claim(newKey(), 'fp')).rejects.toThrow(ConfigurationError);
    await expect(s.claim(newKey(), 'fp')).rejects.toThrow(/sends WAIT, which the Redis client can't/);
    expect(await direct.keys(`{${prefix}}:*`)).toEqual([]);
  });
});

describe("the store's keys", () => {
  it('all carry the prefix as their hash tag: the record, the recovery and expiry sets', async () => {
    const prefix = `keys-${randomUUID()}`;
    const s = redis.store({ prefix });
    expect(s.prefix).toBe(prefix);
    const [key, other] = [newKey(), newKey()];
    expect(s.recordKey(key)).toBe(`{${prefix}}:record:${key}`);
    expect(s.recoverySetKey).toBe(`{${prefix}}:recovery`);
    // A recoverable claim is listed in the recovery set, another in the expiry set.
    expect((await s.claim(key, 'fp', { recoverable: true })).kind).toBe('acquired');
    expect((await s.claim(other, 'fp')).kind).toBe('acquired');
    expect((await redis.direct.keys(`{${prefix}}:*`)).sort()).toEqual(
      [`{${prefix}}:expiry`, `{${prefix}}:record:${key}`, `{${prefix}}:record:${other}`, `{${prefix}}:recovery`].sort(),
    );
    expect(await redis.direct.zRange(`{${prefix}}:recovery`, 0, -1)).toEqual([key]);
    expect(await redis.direct.zRange(`{${prefix}}:expiry`, 0, -1)).toEqual([other]);
    expect(await redis.direct.hGet(`{${prefix}}:record:${key}`, 'status')).toBe('IN_PROGRESS');
  });

  it('under no prefix given: keystone-idempotency', async () => {
    const s = new RedisStore({ client: redis.direct, leaseSeconds: 30 });
    expect(s.prefix).toBe('keystone-idempotency');
    expect(s.recordKey('k')).toBe('{keystone-idempotency}:record:k');
    expect(s.effectKey('n')).toBe('{keystone-idempotency}:n');
  });

  it("refuses, as an effect's key, every key the store writes itself, the one WAIT follows included", () => {
    const prefix = `own-${randomUUID()}`;
    const s = redis.store({ prefix });
    for (const own of ['record:k', 'record:', 'recovery', 'expiry', 'sync']) {
      expect(refusalOf(s, { set: `{${prefix}}:${own}`, value: 'x' }, 3).message).toBe(
        `effect 3 is not a Redis effect: its key ${JSON.stringify(`{${prefix}}:${own}`)} is one of the store's own`,
      );
    }
    // Beside them, a key that only resembles one is the handler's own.
    for (const free of ['records', 'recovery:x', 'x:record:k', 'syncs']) {
      expect(() => s.checkEffect({ set: `{${prefix}}:${free}`, value: 'x' }, 0)).not.toThrow();
    }
  });
});

describe('the hash tag, as Redis Cluster reads it', () => {
  it.each([
    ['{p}:k', 'p'],
    ['orders{p}:k', 'p'],
    ['}{p}:k', 'p'],
    ['a}b{p}:k', 'p'],
    ['{p}{q}', 'p'],
    ['{p{q}', 'p{q'],
  ])('%s has the tag %p', (key, tag) => {
    expect(hashTagOf(key)).toBe(tag);
  });

  it.each(['p}:k', 'k', '{p', '{}{p}', '{}', ''])('%s has none: the whole key is hashed', (key) => {
    expect(hashTagOf(key)).toBeUndefined();
  });

  it("accepts an effect's key only where Redis would place it in the store's slot", () => {
    const s = redis.store({ prefix: 'p' });
    expect(() => s.checkEffect({ set: 'orders{p}:k', value: 'x' }, 0)).not.toThrow();
    expect(() => s.checkEffect({ set: '}{p}:k', value: 'x' }, 0)).not.toThrow();
    for (const key of ['p}:k', '{}{p}:k', '{q}{p}:k']) {
      expect(() => s.checkEffect({ set: key, value: 'x' }, 0)).toThrow(/must carry the store's hash tag \{p\}/);
    }
  });
});

describe('an effect the store refuses when staged, and why', () => {
  const prefix = 'p';
  const why = (effect: unknown) =>
    refusalOf(redis.store({ prefix }), effect, 2).message.replace('effect 2 is not a Redis effect: ', '');
  const shapes = 'expected { set, value }, { hset, field, value }, { incrBy, by } or { require }';

  it('names what is wrong with each', () => {
    expect(why(null)).toBe('not an object');
    expect(why('set')).toBe('not an object');
    expect(why({ incrBy: '{p}:n', by: 0.5 })).toBe('incrBy needs a safe integer `by`');
    expect(why({ incrBy: '{p}:n', by: 2 ** 53 })).toBe('incrBy needs a safe integer `by`');
    // A count sent as text is no incrBy at all: Redis would take '5', but the effect's type says a number.
    expect(why({ incrBy: '{p}:n', by: '5' })).toBe(shapes);
    expect(why({ set: '{p}:n' })).toBe(shapes);
    expect(why({ Put: { TableName: 't', Item: {} } })).toBe(shapes);
    expect(why({ set: '{q}:n', value: 'x' })).toBe(
      'its key "{q}:n" must carry the store\'s hash tag {p} (store.effectKey(name)): on a cluster a script writes one hash slot only',
    );
  });
});
