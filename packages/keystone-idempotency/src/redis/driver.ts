import {
  type ClaimWriteOutcome,
  ConfigurationError,
  type DueOperation,
  EffectConditionFailedError,
  type IdempotencyDriver,
  IdempotencyError,
  type IdempotencyRecord,
  type Lease,
  type RecordStatus,
  type StoredResponse,
  type WriteOutcome,
} from '../engine/index.js';
import { encodeResponse, fromPairs, toFields } from './codec.js';
import {
  type ClientState,
  callEnd,
  isServerReply,
  messageOf,
  onOneConnection,
  type RedisScriptClient,
  sendsPlainCommands,
  sendWithin,
  stateOf,
  waitUntil,
} from './connection.js';
import { type EncodedEffect, encodeEffect, type RedisEffect, type ReservedKeys } from './effect.js';
import { SCRIPTS, type Script } from './scripts.js';

export type { RedisScriptClient } from './connection.js';

/**
 * What the store accepts of the server's `maxmemory-policy`:
 * - `noeviction` (the default): only `noeviction`, under which Redis refuses a write rather than evict a key;
 * - `volatile`: `noeviction` or a `volatile-*` policy, which evicts keys with a TTL only. An unfinished record has
 *   none, so it is never evicted; a completed, released or abandoned one has, and under memory pressure may go before
 *   its expiry: a retry then runs the work again, under a new downstream key. Accept it knowingly;
 * - `skip`: no check, for a server whose INFO does not say (you vouch for the setting: a parameter group's
 *   `maxmemory-policy`, see the docs).
 */
export type EvictionCheck = 'noeviction' | 'volatile' | 'skip';

/**
 * How an acknowledged write survives a crash of the server that acknowledged it
 * ([what each can lose](https://github.com/keystone-idempotency/keystone-idempotency/blob/main/docs/redis.md#persistence-what-an-acknowledged-write-survives)):
 * - `'fsync'` (the default): on the server's disk before the reply. The store refuses a server without
 *   `appendonly yes` and `appendfsync always` (read with INFO and CONFIG GET);
 * - `{ replicas, timeoutMs }`: every write is followed by `WAIT replicas timeoutMs`, and a write fewer replicas
 *   acknowledged in time fails the call (retryable). For a server with replicas and no fsync on every write;
 * - `'unchecked'`: no check, for a server whose CONFIG is blocked (ElastiCache) or that is durable by itself
 *   (MemoryDB): you vouch for it.
 */
export type RedisDurability = 'fsync' | { readonly replicas: number; readonly timeoutMs: number } | 'unchecked';

export interface RedisDriverOptions {
  readonly client: RedisScriptClient;
  /** The hash tag every key of the store carries, `{prefix}`. Default `keystone-idempotency`. */
  readonly prefix?: string;
  readonly maxEffects: number;
  readonly maxResponseBytes: number;
  readonly evictionCheck?: EvictionCheck;
  /** Default `'fsync'`. */
  readonly durability?: RedisDurability;
  /**
   * How many times a script is sent when its connection fails, or its reply does not come in its share of the call's
   * time, before the reply: safe for every script, since a write sent again meets what its first sending wrote and the
   * engine recognises it by its lease token. Default 2. Error replies from the server are never sent again.
   */
  readonly attempts?: number;
  /**
   * When the current call must have had its answer, in epoch milliseconds (the function's end, less the time it needs
   * to answer), or undefined when it has none: then 10 s. A reply that has not come by then fails the call with a
   * retryable `IdempotencyError`, and its connection is not used again.
   */
  readonly deadline?: () => number | undefined;
}

export const DEFAULT_PREFIX = 'keystone-idempotency';

/**
 * How much sooner than the call's end a WAIT is timed out: Redis times out a blocked WAIT on its event loop, which at
 * its default `hz` of 10 wakes up to 100 ms late (measured: `WAIT 1 100` answers after about 200 ms), and the reply
 * still has to travel.
 */
const WAIT_REPLY_MARGIN_MS = 150;

/**
 * The idempotency driver on Redis (and Valkey): each conditional write one Lua script over the record's hash, the
 * recovery set (a sorted set by `recoverAt`) and the effects' keys, all in one hash slot. Written against the
 * package's published driver interface only (`keystone-idempotency/engine`), as a store outside the package would be.
 */
export class RedisDriver implements IdempotencyDriver<RedisEffect> {
  readonly maxEffects: number;
  readonly maxResponseBytes: number;
  readonly keys: ReservedKeys;
  private readonly evictionCheck: EvictionCheck;
  private readonly durability: RedisDurability;
  private readonly attempts: number;
  private readonly deadline: () => number | undefined;
  private readonly state: ClientState;

  constructor(options: RedisDriverOptions) {
    const prefix = options.prefix ?? DEFAULT_PREFIX;
    if (prefix === '' || /[{}]/.test(prefix)) {
      throw new ConfigurationError(
        `the Redis store's prefix must be non-empty, without { or }: got ${JSON.stringify(prefix)}`,
      );
    }
    const attempts = options.attempts ?? 2;
    if (!Number.isInteger(attempts) || attempts < 1) {
      throw new ConfigurationError(`attempts must be a positive integer, got ${attempts}`);
    }
    const durability = options.durability ?? 'fsync';
    if (typeof durability === 'object') {
      const { replicas, timeoutMs } = durability;
      if (!Number.isInteger(replicas) || replicas < 1 || !Number.isInteger(timeoutMs) || timeoutMs < 1) {
        throw new ConfigurationError(
          `durability needs a positive whole number of replicas and of timeoutMs, got ${JSON.stringify(durability)}`,
        );
      }
    }
    const tag = `{${prefix}}`;
    this.keys = {
      tag: prefix,
      recordPrefix: `${tag}:record:`,
      recoverySet: `${tag}:recovery`,
      expirySet: `${tag}:expiry`,
      sync: `${tag}:sync`,
    };
    this.maxEffects = options.maxEffects;
    this.maxResponseBytes = options.maxResponseBytes;
    this.evictionCheck = options.evictionCheck ?? 'noeviction';
    this.durability = durability;
    this.attempts = attempts;
    this.deadline = options.deadline ?? (() => undefined);
    this.state = stateOf(options.client);
  }

  /** The Redis key of the record under an engine key. */
  recordKey(key: string): string {
    return `${this.keys.recordPrefix}${key}`;
  }

  checkEffect(effect: unknown, index: number): void {
    encodeEffect(effect, index, this.keys);
  }

  async read(key: string): Promise<IdempotencyRecord | undefined> {
    const reply = await this.run(SCRIPTS.read, [this.recordKey(key)], []);
    return fromPairs(asArray(reply));
  }

  async putFresh({ record, now }: { record: IdempotencyRecord; now: number }): Promise<ClaimWriteOutcome> {
    return this.place(record, now, undefined, []);
  }

  async takeOver({ previous, record, now }: { previous: IdempotencyRecord; record: IdempotencyRecord; now: number }) {
    return this.place(record, now, previous, []);
  }

  async commitOneShot(write: {
    readonly record: IdempotencyRecord;
    readonly previous: IdempotencyRecord | undefined;
    readonly effects: readonly RedisEffect[];
    readonly now: number;
  }): Promise<WriteOutcome> {
    return this.place(write.record, write.now, write.previous, write.effects);
  }

  async commit(write: {
    readonly lease: Lease;
    readonly response: StoredResponse;
    readonly effects: readonly RedisEffect[];
    readonly now: number;
    readonly expiresAt: number;
  }): Promise<WriteOutcome> {
    const effects = this.encodeEffects(write.effects);
    const reply = await this.write(write.lease.leaseToken, SCRIPTS.commit, this.keysWith(write.lease.key, effects), [
      write.lease.key,
      String(write.now),
      write.lease.leaseToken,
      encodeResponse(write.response),
      String(write.expiresAt),
      String(effects.length),
      ...effects.flatMap((effect) => effect.args),
    ]);
    return outcomeOf(reply, write.effects);
  }

  async endLease(write: {
    readonly lease: Lease;
    readonly status: typeof RecordStatus.Released | typeof RecordStatus.Abandoned;
    readonly now: number;
    readonly recoverAt?: number | null;
    readonly expiresAt?: number | null;
  }): Promise<WriteOutcome> {
    const change = (value: number | null | undefined) =>
      value === undefined ? '' : value === null ? '-' : String(value);
    const reply = await this.write(write.lease.leaseToken, SCRIPTS.endLease, this.keysWith(write.lease.key, []), [
      write.lease.key,
      String(write.now),
      write.lease.leaseToken,
      write.status,
      change(write.recoverAt),
      change(write.expiresAt),
    ]);
    return outcomeOf(reply, []);
  }

  async findDue({ now, limit }: { now: number; limit: number }): Promise<DueOperation[]> {
    const reply = asArray(await this.run(SCRIPTS.findDue, [this.keys.recoverySet], [String(now), String(limit)]));
    const due: DueOperation[] = [];
    for (let i = 0; i + 1 < reply.length; i += 2) due.push({ key: String(reply[i]), recoverAt: Number(reply[i + 1]) });
    return due;
  }

  /** putFresh (no `previous`), takeOver and commitOneShot: the whole record, on a fresh claim's or a takeover's condition. */
  private async place(
    record: IdempotencyRecord,
    now: number,
    previous: IdempotencyRecord | undefined,
    staged: readonly RedisEffect[],
  ): Promise<WriteOutcome> {
    const effects = this.encodeEffects(staged);
    const fields = toFields(record);
    const reply = await this.write(record.leaseToken, SCRIPTS.place, this.keysWith(record.key, effects), [
      record.key,
      String(now),
      previous?.leaseToken ?? '',
      previous?.status ?? '',
      String(fields.length),
      ...fields,
      String(effects.length),
      ...effects.flatMap((effect) => effect.args),
    ]);
    return outcomeOf(reply, staged);
  }

  private encodeEffects(effects: readonly RedisEffect[]): EncodedEffect[] {
    return effects.map((effect, index) => encodeEffect(effect, index, this.keys));
  }

  private keysWith(key: string, effects: readonly EncodedEffect[]): string[] {
    return [this.recordKey(key), this.keys.recoverySet, this.keys.expirySet, ...effects.map((effect) => effect.key)];
  }

  /**
   * A writing script. Under `durability: { replicas, timeoutMs }`, once it wrote (or met its own earlier write, sent
   * again after a lost reply: `leaseToken` is the one it writes), the store waits for the replicas to have it.
   */
  private async write(leaseToken: string, script: Script, keys: string[], args: string[]): Promise<unknown> {
    const end = callEnd(this.deadline());
    const reply = await this.run(script, keys, args, end);
    if (typeof this.durability === 'object' && wroteOrMetOwn(reply, leaseToken)) {
      await this.waitForReplicas(this.durability, end);
    }
    return reply;
  }

  /**
   * Runs a script, after the server's check: whole (EVAL, which also caches it) the first time this client sends it,
   * by its SHA-1 after that; whole again when the server has lost it (NOSCRIPT: a restart, a failover, SCRIPT FLUSH).
   */
  private async run(script: Script, keys: string[], args: string[], end = callEnd(this.deadline())): Promise<unknown> {
    await this.ready(end);
    return this.send(script, keys, args, end);
  }

  private async send(script: Script, keys: string[], args: string[], end: number): Promise<unknown> {
    const options = { keys, arguments: args };
    const loaded = this.state.loaded;
    return sendWithin(this.state, end, this.attempts, async (client) => {
      if (!loaded.has(script.sha)) {
        const reply = await client.eval(script.source, options);
        loaded.add(script.sha);
        return reply;
      }
      try {
        return await client.evalSha(script.sha, options);
      } catch (error) {
        if (!/^NOSCRIPT\b/.test(messageOf(error))) throw error;
        return await client.eval(script.source, options);
      }
    });
  }

  /**
   * The server's eviction policy and persistence, checked once for each store's requirements (its prefix, hence its
   * shard on a cluster, and what it accepts) before its first script, within the call's time. A refusal stands; a
   * check that could not be made (a connection that failed) is made again by the next call.
   */
  private async ready(end: number): Promise<void> {
    if (this.evictionCheck === 'skip' && this.durability === 'unchecked') return;
    const requirement = JSON.stringify([this.keys.tag, this.evictionCheck, this.durability]);
    let checked = this.state.checks.get(requirement);
    if (!checked) {
      checked = this.checkServer(end).catch((error: unknown) => {
        if (!(error instanceof ConfigurationError)) this.state.checks.delete(requirement);
        throw error;
      });
      this.state.checks.set(requirement, checked);
    }
    // Another call's check, under way: waited for no longer than this call has.
    await waitUntil(end, checked);
  }

  private async checkServer(end: number): Promise<void> {
    const settings = asArray(await this.send(SCRIPTS.serverSettings, [this.keys.recoverySet], [], end));
    const [policy, aof] = settings.map(String);
    this.checkEviction(policy ?? '');
    if (this.durability === 'fsync') await this.checkFsync(aof ?? '', end);
    if (typeof this.durability === 'object' && !sendsPlainCommands(this.state.given)) {
      throw new ConfigurationError(
        "durability: { replicas, timeoutMs } sends WAIT, which the Redis client can't (it has no sendCommand, as @redis/client's createClient, createClientPool and createCluster have)",
      );
    }
  }

  private checkEviction(policy: string): void {
    if (this.evictionCheck === 'skip' || policy === 'noeviction') return;
    if (this.evictionCheck === 'volatile' && policy.startsWith('volatile-')) return;
    const accepted = this.evictionCheck === 'volatile' ? 'noeviction or volatile-*' : 'noeviction';
    throw new ConfigurationError(
      policy === ''
        ? `the Redis server did not report its maxmemory-policy (INFO memory): set it to ${accepted} (on ElastiCache, in the ` +
            "parameter group), then pass evictionCheck: 'skip'"
        : `the Redis server's maxmemory-policy is ${policy}, which can evict the store's records (a completed one lost ` +
            `is work run twice; an unfinished one, work lost): the store needs ${accepted}`,
    );
  }

  private async checkFsync(aof: string, end: number): Promise<void> {
    const choices =
      "run it with appendonly yes and appendfsync always, or pass durability: { replicas, timeoutMs } to WAIT for replicas after each write, or durability: 'unchecked' if it is durable by other means";
    if (aof !== '1') {
      throw new ConfigurationError(
        `the Redis server keeps no append-only file (appendonly no): a crash or restart loses every record, and a retry then runs the work again. ${choices}`,
      );
    }
    let fsync: string;
    try {
      fsync = await sendWithin(this.state, end, this.attempts, (client) =>
        onOneConnection(client, this.keys.sync, async (one) =>
          configValue(await one.sendCommand(['CONFIG', 'GET', 'appendfsync'])),
        ),
      );
    } catch (error) {
      if (!(isServerReply(error) || error instanceof ConfigurationError)) throw error;
      throw new ConfigurationError(
        `the store could not read the Redis server's appendfsync (${messageOf(error)}), as where CONFIG is blocked ` +
          `(ElastiCache): ${choices}`,
      );
    }
    if (fsync !== 'always') {
      throw new ConfigurationError(
        `the Redis server's appendfsync is ${fsync || 'not reported'}: a crash loses the writes it acknowledged since its last fsync (up to about two seconds of them with everysec), and a retry then runs the work again. ${choices}`,
      );
    }
  }

  /**
   * WAIT for the replicas, on one connection after a write of its own there: WAIT counts its own connection's writes,
   * and the script's may have gone on another (a pool's, a reconnected client's, or none at all when it met its own
   * earlier write). Replication keeps order, so a replica that has this write has the script's. WAIT is asked for what
   * the call has left less {@link WAIT_REPLY_MARGIN_MS}, so that its own answer comes within the call's time.
   */
  private async waitForReplicas(durability: { replicas: number; timeoutMs: number }, end: number): Promise<void> {
    const { replicas, timeoutMs } = durability;
    let waitedMs = timeoutMs;
    const acknowledged = await sendWithin(this.state, end, this.attempts, (client, timeLeftMs) =>
      onOneConnection(client, this.keys.sync, async (one) => {
        waitedMs = Math.max(1, Math.min(timeoutMs, timeLeftMs - WAIT_REPLY_MARGIN_MS));
        const [, acked] = await Promise.all([
          one.sendCommand(['SET', this.keys.sync, '1']),
          one.sendCommand(['WAIT', String(replicas), String(waitedMs)]),
        ]);
        return Number(acked);
      }),
    );
    if (acknowledged < replicas) {
      throw new IdempotencyError(
        `the write reached ${acknowledged} of the ${replicas} replicas it needs within ${waitedMs} ms: a failover ` +
          'could lose it; retry, and it is recognised as the same call',
      );
    }
  }
}

function asArray(reply: unknown): unknown[] {
  if (!Array.isArray(reply)) throw new Error(`unexpected reply from a store script: ${JSON.stringify(reply)}`);
  return reply;
}

/** Whether a write script wrote, or met the record it writes (its own, sent again after a lost reply). */
function wroteOrMetOwn(reply: unknown, leaseToken: string): boolean {
  const [kind] = asArray(reply);
  if (kind === 'written') return true;
  return kind === 'met' && fromPairs(asArray(reply).slice(1))?.leaseToken === leaseToken;
}

/**
 * The value in CONFIG GET's reply for the one parameter asked for, as the client maps the reply: an object (node-redis's
 * default), a Map, or the pair as an array; '' when the server has no such parameter.
 */
function configValue(reply: unknown): string {
  const [value] = Array.isArray(reply)
    ? reply.slice(1)
    : reply instanceof Map
      ? reply.values()
      : Object.values(reply ?? {});
  return String(value ?? '');
}

function outcomeOf(reply: unknown, effects: readonly RedisEffect[]): WriteOutcome {
  const [kind, ...rest] = asArray(reply);
  if (kind === 'written') return { kind: 'written' };
  if (kind === 'met') return { kind: 'met', record: fromPairs(rest) };
  if (kind === 'effect') {
    const index = Number(rest[0]) - 1;
    throw new EffectConditionFailedError(index, { ...(effects[index] ?? {}) });
  }
  throw new Error(`unexpected reply from a store script: ${JSON.stringify(reply)}`);
}
