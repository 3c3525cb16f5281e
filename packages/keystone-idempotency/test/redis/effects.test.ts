import { randomUUID } from 'node:crypto';
import {
  EffectConditionFailedError,
  type Lease,
  makeIdempotent,
  type StoredResponse,
  scopedKey,
} from '../../src/engine';
import type { RedisEffect, RedisStore } from '../../src/redis';
import { redisEngineCommands, testRedis } from '../support/redis';

/**
 * A commit's effects all or nothing, on a real redis-server. A Lua script can't roll back: a command that fails half
 * way leaves the writes before it. So every effect is checked as Redis will run it, in order, against what the
 * effects before it in the same commit leave (a `set` then an `incrBy` of the same key, a hash then a count), with
 * INCRBY's own reading of a number ('007', '-0', '+1' are not integers to it), before the script's first write.
 */
const redis = testRedis();
const created: StoredResponse = { statusCode: 201, body: '{"id":"pay_1"}', headers: {} };
const newKey = () => scopedKey({ accountId: 'acct_effects', operation: 'POST /payments', key: randomUUID() });
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

async function acquire(s: RedisStore, key: string): Promise<Lease> {
  const outcome = await s.claim(key, 'fp');
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

/** Every key under the name, with its type and value: what a refused commit must leave exactly as it was. */
async function snapshot(keys: readonly string[]): Promise<unknown[]> {
  return Promise.all(
    keys.map(async (key) => {
      const type = await redis.direct.type(key);
      if (type === 'string') return [key, type, await redis.direct.get(key)];
      if (type === 'hash') return [key, type, await redis.direct.hGetAll(key)];
      return [key, type];
    }),
  );
}

/** A case: what the key holds before the commit (written behind the store's back), and the commit's effects. */
interface Refused {
  readonly name: string;
  readonly before?: (k: string) => Promise<unknown>;
  readonly effects: (k: string) => RedisEffect[];
  /** The index of the effect Redis would refuse (after the count in front of every case). */
  readonly refused: number;
}

const refusedInOrder: Refused[] = [
  {
    name: 'set K then incrBy K, K not a number',
    effects: (k) => [
      { set: k, value: 'x' },
      { incrBy: k, by: 1 },
    ],
    refused: 2,
  },
  {
    name: 'hset K then incrBy K (WRONGTYPE)',
    effects: (k) => [
      { hset: k, field: 'f', value: '1' },
      { incrBy: k, by: 1 },
    ],
    refused: 2,
  },
  {
    name: 'set K then hset K (WRONGTYPE)',
    effects: (k) => [
      { set: k, value: '1' },
      { hset: k, field: 'f', value: '1' },
    ],
    refused: 2,
  },
  {
    name: "incrBy K holding '007'",
    before: (k) => redis.direct.set(k, '007'),
    effects: (k) => [{ incrBy: k, by: 1 }],
    refused: 1,
  },
  {
    name: "incrBy K holding '-0'",
    before: (k) => redis.direct.set(k, '-0'),
    effects: (k) => [{ incrBy: k, by: 1 }],
    refused: 1,
  },
  {
    name: "incrBy K holding '+1'",
    before: (k) => redis.direct.set(k, '+1'),
    effects: (k) => [{ incrBy: k, by: 1 }],
    refused: 1,
  },
  {
    name: "incrBy K holding ' 1'",
    before: (k) => redis.direct.set(k, ' 1'),
    effects: (k) => [{ incrBy: k, by: 1 }],
    refused: 1,
  },
  {
    name: 'incrBy K holding a number past int64',
    before: (k) => redis.direct.set(k, '99999999999999999999'),
    effects: (k) => [{ incrBy: k, by: -1 }],
    refused: 1,
  },
  {
    name: 'incrBy K holding int64 max, by 1 (overflow)',
    before: (k) => redis.direct.set(k, '9223372036854775807'),
    effects: (k) => [{ incrBy: k, by: 1 }],
    refused: 1,
  },
  {
    name: 'set K to a number, then incrBy K past the safe integers',
    effects: (k) => [
      { set: k, value: String(MAX_SAFE - 1) },
      { incrBy: k, by: 2 },
    ],
    refused: 2,
  },
  {
    name: 'two incrBy K whose running sum leaves the safe integers',
    effects: (k) => [
      { incrBy: k, by: MAX_SAFE },
      { incrBy: k, by: 1 },
    ],
    refused: 2,
  },
  {
    name: 'set K ifAbsent twice',
    effects: (k) => [
      { set: k, value: 'a', ifAbsent: true },
      { set: k, value: 'b', ifAbsent: true },
    ],
    refused: 2,
  },
  {
    name: 'hset K f ifAbsent twice',
    effects: (k) => [
      { hset: k, field: 'f', value: 'a', ifAbsent: true },
      { hset: k, field: 'f', value: 'b', ifAbsent: true },
    ],
    refused: 2,
  },
];

describe('a commit whose effect Redis would refuse part way', () => {
  it.each(refusedInOrder.map((c) => [c.name, c] as const))(
    '%s: refused as EffectConditionFailedError, nothing written, the record as it was',
    async (_, c) => {
      const s = redis.store();
      const key = newKey();
      const lease = await acquire(s, key);
      const k = s.effectKey(`k:${randomUUID()}`);
      const first = s.effectKey(`first:${randomUUID()}`); // written first: a partial write would leave it
      await c.before?.(k);
      const before = await snapshot([k, first]);
      const recordBefore = await redis.direct.hGetAll(s.recordKey(key));
      const error = await s
        .commit(lease, created, [{ incrBy: first, by: 1 }, ...c.effects(k)])
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(EffectConditionFailedError);
      expect(error).toMatchObject({ index: c.refused });
      expect(await snapshot([k, first])).toEqual(before);
      expect(await redis.direct.hGetAll(s.recordKey(key))).toEqual(recordBefore);
      // The same lease commits once its effects are ones Redis runs whole.
      await s.commit(lease, created, [{ incrBy: first, by: 1 }]);
      expect(await redis.direct.get(first)).toBe('1');
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
    },
  );

  it('refused in a one-shot commit as well: nothing written, the key still free', async () => {
    const s = redis.store();
    const key = newKey();
    const k = s.effectKey(`k:${randomUUID()}`);
    const first = s.effectKey(`first:${randomUUID()}`);
    const error = await s
      .claimAndCommit(key, 'fp', async () => ({
        response: created,
        effects: [
          { incrBy: first, by: 1 },
          { hset: k, field: 'f', value: '1' },
          { incrBy: k, by: 1 },
        ],
      }))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EffectConditionFailedError);
    expect(await redis.direct.exists([k, first])).toBe(0);
    expect(await redis.direct.exists(s.recordKey(key))).toBe(0);
  });
});

describe('a commit whose effects Redis runs whole in order', () => {
  it('commits what the data before the commit alone would have refused', async () => {
    const s = redis.store();
    const key = newKey();
    const lease = await acquire(s, key);
    const hash = s.effectKey(`was-a-hash:${randomUUID()}`);
    const text = s.effectKey(`was-text:${randomUUID()}`);
    const fresh = s.effectKey(`fresh:${randomUUID()}`);
    await redis.direct.hSet(hash, 'f', '1');
    await redis.direct.set(text, 'not a number');
    await s.commit(lease, created, [
      { set: hash, value: '5' }, // SET replaces the hash
      { incrBy: hash, by: 1 },
      { set: text, value: '-7' },
      { incrBy: text, by: 7 },
      { set: fresh, value: 'here' },
      { require: fresh }, // written by the effect before it
      { incrBy: s.effectKey(`sum:${key}`), by: MAX_SAFE - 1 },
      { incrBy: s.effectKey(`sum:${key}`), by: 1 }, // exactly the largest safe integer
    ]);
    expect(await redis.direct.get(hash)).toBe('6');
    expect(await redis.direct.get(text)).toBe('0');
    expect(await redis.direct.get(fresh)).toBe('here');
    expect(await redis.direct.get(s.effectKey(`sum:${key}`))).toBe(String(MAX_SAFE));
  });
});

describe('three calls of one makeIdempotent key', () => {
  it('whose effects Redis runs whole: the work runs once, the others replay', async () => {
    const s = redis.store();
    const k = s.effectKey(`k:${randomUUID()}`);
    await redis.direct.hSet(k, 'f', '1');
    let runs = 0;
    const work = makeIdempotent(
      async (_: { id: string }, idempotency) => {
        runs += 1;
        idempotency.stage({ set: k, value: '5' }, { incrBy: k, by: 1 });
        return { runs };
      },
      { store: s, name: 'in-order', key: (input) => input.id },
    );
    const id = randomUUID();
    for (let i = 0; i < 3; i++) expect(await work({ id })).toEqual({ runs: 1 });
    expect(runs).toBe(1);
    expect(await redis.direct.get(k)).toBe('6');
  });

  it('whose effects Redis would refuse part way: every call refused whole, nothing ever written, one downstream key', async () => {
    const s = redis.store();
    const k = s.effectKey(`k:${randomUUID()}`);
    const count = s.effectKey(`count:${randomUUID()}`);
    const downstreamKeys = new Set<string>();
    const work = makeIdempotent(
      async (_: { id: string }, idempotency) => {
        downstreamKeys.add(idempotency.downstreamKey);
        idempotency.stage({ incrBy: count, by: 1 }, { set: k, value: 'x' }, { incrBy: k, by: 1 });
        return 'done';
      },
      { store: s, name: 'refused', key: (input) => input.id },
    );
    const id = randomUUID();
    for (let i = 0; i < 3; i++) {
      const error = await work({ id }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(EffectConditionFailedError); // never Redis's raw ERR or WRONGTYPE
    }
    expect(await redis.direct.exists([k, count])).toBe(0);
    // The engine gives the key back after a refused commit: each retry runs under the first attempt's downstream key.
    expect(downstreamKeys.size).toBe(1);
  });
});

describe('a commit whose effects run whole only in order, its reply lost', () => {
  it('sent again, it meets its own completion: the effects are there once', async () => {
    const s = redis.store({ attempts: 2 });
    const key = newKey();
    const lease = await acquire(s, key);
    const k = s.effectKey(`k:${randomUUID()}`);
    await redis.direct.hSet(k, 'f', '1');
    const lost = redis.proxy.arm({ match: redisEngineCommands().commit(key), fault: { mode: 'drop-reply' }, count: 1 });
    await s.commit(lease, created, [
      { set: k, value: '5' },
      { incrBy: k, by: 1 },
      { incrBy: k, by: 1 },
    ]);
    expect(lost.fired()).toBe(1);
    expect(await redis.direct.get(k)).toBe('7'); // not 9: the second sending wrote nothing
  });
});
