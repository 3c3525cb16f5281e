import { ConfigurationError, DriverStore, type StoreLifetimeOptions } from '../engine/index.js';
import { type EvictionCheck, RedisDriver, type RedisDurability, type RedisScriptClient } from './driver.js';
import { isReserved, type RedisEffect } from './effect.js';

export interface RedisStoreOptions extends StoreLifetimeOptions {
  /** A connected `@redis/client` client or cluster (`createClient(...).connect()`, `createCluster(...).connect()`). */
  readonly client: RedisScriptClient;
  /**
   * The hash tag of every key the store writes (`{prefix}:record:<key>`, `{prefix}:recovery`): one hash slot, so each
   * script's keys are in one slot on a cluster. Default `keystone-idempotency`.
   */
  readonly prefix?: string;
  /** What the store accepts of the server's `maxmemory-policy`, checked before its first command. Default `noeviction`. */
  readonly evictionCheck?: EvictionCheck;
  /**
   * How an acknowledged write survives a crash of the server, checked (or, with replicas, waited for) as the eviction
   * policy is. Default `'fsync'`: `appendonly yes` with `appendfsync always`, or the store refuses to start.
   */
  readonly durability?: RedisDurability;
  /**
   * When the current call must have had its answer, in epoch ms (the invocation's end less the time it needs to
   * answer), or undefined (then 10 s): a reply that has not come by then fails the call with a retryable
   * `IdempotencyError`, and its connection is not used again.
   */
  readonly deadline?: () => number | undefined;
  /** Largest stored response (body plus headers, bytes). Default 1 MiB. */
  readonly maxResponseBytes?: number;
  /** Most effects one commit carries. Default 100. */
  readonly maxEffects?: number;
  /**
   * How many times a script is sent when its connection fails, or its reply does not come in its share of the call's
   * time (a fresh connection for each). Default 2.
   */
  readonly attempts?: number;
}

export const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;
export const DEFAULT_MAX_EFFECTS = 100;

/**
 * The idempotency engine's store on Redis OSS 7 or Valkey 7.2 and newer (ElastiCache included): a record is a hash,
 * every conditional write is one Lua script, and the recovery set is a sorted set by `recoverAt`.
 *
 * ```
 *  claim: script, free?                commit: script, lease token = mine and IN_PROGRESS,
 *  absent|expired ──► IN_PROGRESS ─────────── the effects' conditions, then all of it ──────► COMPLETED, PEXPIRE
 *  (not in recovery)    │   ▲
 *            release    │   │  takeover: script, lease token and status still as seen
 *  lease token = mine   ▼   │
 *                     RELEASED        unfinished: no TTL (PERSIST), in the recovery set by recoverAt if recoverable,
 *                                     else in the expiry set by expiresAt; finished: PEXPIRE
 * ```
 *
 * Each script runs with nothing in between (Redis runs one at a time), so a claim's check and write, or a commit's
 * fence, effects and completion, are one atomic step; the effects (`RedisEffect`) are commands on keys of the store's
 * hash slot (`effectKey`). Expiry: a finished record's own TTL, the time its `expiresAt` leaves as the engine's clock
 * counts it, plus the engine's read filter; an unfinished one has no TTL for eviction to act on, and one that is not
 * recoverable is deleted by a later claim once its `expiresAt` has passed.
 *
 * Eviction and a crash are what a script can't fence: before its first command each store reads the `maxmemory-policy`
 * and the persistence of the server that holds its slot, and refuses, with a `ConfigurationError`, a policy that could
 * evict its records (`evictionCheck`) or a server that can lose a write it acknowledged (`durability`). Every call is
 * bounded by its `deadline`.
 *
 * @example
 * const client = createClient({ url: process.env.REDIS_URL, socket: { socketTimeout: 5000 }, pingInterval: 1000 });
 * client.on('error', (error) => console.error('redis', error));
 * const store = new RedisStore({ client: await client.connect() });
 * const outcome = await store.claim(scopedKey(scope), fingerprint(request));
 * if (outcome.kind === 'acquired') {
 *   await store.commit(outcome.lease, response, [{ incrBy: store.effectKey(`orders:${customer}`), by: 1 }]);
 * }
 */
export class RedisStore extends DriverStore<RedisEffect> {
  /** The hash tag every key of the store carries, and an effect's key must. */
  readonly prefix: string;
  private readonly redis: RedisDriver;

  constructor(options: RedisStoreOptions) {
    const driver = new RedisDriver({
      ...options,
      maxEffects: options.maxEffects ?? DEFAULT_MAX_EFFECTS,
      maxResponseBytes: options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
    });
    super(driver, options);
    this.redis = driver;
    this.prefix = driver.keys.tag;
  }

  /**
   * A key in the store's hash slot, for an effect: `{prefix}:name`. Refuses the names of the store's own keys.
   *
   * @example
   * idempotency.stage({ hset: store.effectKey(`order:${orderId}`), field: 'status', value: 'shipped' });
   */
  effectKey(name: string): string {
    const key = `{${this.prefix}}:${name}`;
    if (isReserved(key, this.redis.keys)) {
      throw new ConfigurationError(`${JSON.stringify(name)} names one of the Redis store's own keys`);
    }
    return key;
  }

  /** The Redis key holding the record under an engine key (for inspection: `HGETALL`, `PTTL`). */
  recordKey(key: string): string {
    return this.redis.recordKey(key);
  }

  /** The Redis key of the recovery set (a sorted set: members are engine keys, scores `recoverAt`). */
  get recoverySetKey(): string {
    return this.redis.keys.recoverySet;
  }
}
