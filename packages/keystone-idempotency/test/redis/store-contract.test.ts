import { randomUUID } from 'node:crypto';
import { fromPairs } from '../../src/redis/codec';
import { describeStoreContract } from '../../src/testing';
import { redisEngineCommands, testRedis } from '../support/redis';

/**
 * The published store contract suite (`keystone-idempotency/testing`) against the Redis store on a real redis-server,
 * started for this file: the same cases that prove the DynamoDB and PostgreSQL stores, with round trips counted and
 * replies lost by the fault proxy in front of the server.
 */
describeStoreContract({
  name: 'Redis',
  setup: () => {
    const redis = testRedis();
    const commands = redisEngineCommands();
    return {
      store: (options) => redis.store(options),
      effect: (pk, id) => ({ hset: redis.key(`rows:${pk}`), field: id, value: '1', ifAbsent: true }),
      blockedEffect: () => ({ require: redis.key(`missing:${randomUUID()}`) }),
      rowsUnder: (pk) => redis.direct.hLen(redis.key(`rows:${pk}`)),
      maxResponseBytes: 1024 * 1024,
      roundTrips: {
        reset: () => redis.proxy.reset(),
        get count() {
          return redis.proxy.commands().length;
        },
      },
      async stored(key) {
        const hash = await redis.direct.hGetAll(redis.store().recordKey(key));
        return fromPairs(Object.entries(hash).flat());
      },
      faults: {
        store: ({ attempts, ...options }) => redis.store({ ...options, ...(attempts ? { attempts } : {}) }),
        loseReplies: (step, key, times = 1) =>
          redis.proxy.arm({ match: commands[step](key), fault: { mode: 'drop-reply' }, count: times }),
      },
    };
  },
});
