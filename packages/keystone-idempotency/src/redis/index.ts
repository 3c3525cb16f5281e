/**
 * The engine's store on Redis OSS 7+ and Valkey 7.2+ (ElastiCache, node-based or Serverless): `RedisStore`, each
 * conditional write one Lua script, effects as commands in the store's hash slot (`RedisEffect`). Needs a client with
 * `eval` and `evalSha` as `@redis/client` has them (an optional peer dependency); the engine itself never imports it.
 */
export {
  DEFAULT_PREFIX,
  type EvictionCheck,
  RedisDriver,
  type RedisDriverOptions,
  type RedisDurability,
  type RedisScriptClient,
} from './driver.js';
export { hashTagOf, type RedisEffect } from './effect.js';
export { DEFAULT_MAX_EFFECTS, DEFAULT_MAX_RESPONSE_BYTES, RedisStore, type RedisStoreOptions } from './store.js';
