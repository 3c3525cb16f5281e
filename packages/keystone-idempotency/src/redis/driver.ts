import {
  type ClaimWriteOutcome,
  ConfigurationError,
  type DueOperation,
  EffectConditionFailedError,
  type IdempotencyDriver,
  type IdempotencyRecord,
  type Lease,
  type RecordStatus,
  type StoredResponse,
  type WriteOutcome,
} from '../engine/index.js';
import { encodeResponse, fromPairs, toFields } from './codec.js';
import { type EncodedEffect, encodeEffect, type RedisEffect, type ReservedKeys } from './effect.js';
import { SCRIPTS, type Script } from './scripts.js';

/**
 * The two commands the store sends, as `@redis/client` names them: a connected `createClient()` or `createCluster()`
 * has both (the cluster routes each by its first key, the record's, so every script runs on the shard of the store's
 * hash slot). Another client fits behind ten lines that call its own EVAL and EVALSHA.
 */
export interface RedisScriptClient {
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  evalSha(sha1: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
}

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

export interface RedisDriverOptions {
  readonly client: RedisScriptClient;
  /** The hash tag every key of the store carries, `{prefix}`. Default `keystone-idempotency`. */
  readonly prefix?: string;
  readonly maxEffects: number;
  readonly maxResponseBytes: number;
  readonly evictionCheck?: EvictionCheck;
  /**
   * How many times a script is sent when the connection fails before its reply came (a reset, the server restarting):
   * safe for every script, since a write sent again meets what its first sending wrote and the engine recognises it by
   * its lease token. Default 2. Error replies from the server are never sent again.
   */
  readonly attempts?: number;
}

export const DEFAULT_PREFIX = 'keystone-idempotency';

/** Per client: the eviction policy checked once, and the scripts it has been sent whole (EVAL caches them). */
interface ClientState {
  checked?: Promise<void>;
  readonly loaded: Set<string>;
}
const clients = new WeakMap<RedisScriptClient, ClientState>();

/**
 * The idempotency driver on Redis (and Valkey): each conditional write one Lua script over the record's hash, the
 * recovery set (a sorted set by `recoverAt`) and the effects' keys, all in one hash slot. Written against the
 * package's published driver interface only (`keystone-idempotency/engine`), as a store outside the package would be.
 */
export class RedisDriver implements IdempotencyDriver<RedisEffect> {
  readonly maxEffects: number;
  readonly maxResponseBytes: number;
  readonly keys: ReservedKeys;
  private readonly client: RedisScriptClient;
  private readonly evictionCheck: EvictionCheck;
  private readonly attempts: number;
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
    const tag = `{${prefix}}`;
    this.keys = {
      tag: prefix,
      recordPrefix: `${tag}:record:`,
      recoverySet: `${tag}:recovery`,
      expirySet: `${tag}:expiry`,
    };
    this.client = options.client;
    this.maxEffects = options.maxEffects;
    this.maxResponseBytes = options.maxResponseBytes;
    this.evictionCheck = options.evictionCheck ?? 'noeviction';
    this.attempts = attempts;
    const state = clients.get(options.client) ?? { loaded: new Set<string>() };
    clients.set(options.client, state);
    this.state = state;
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
    const reply = await this.run(SCRIPTS.commit, this.keysWith(write.lease.key, effects), [
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
    const reply = await this.run(SCRIPTS.endLease, this.keysWith(write.lease.key, []), [
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
    const reply = await this.run(SCRIPTS.place, this.keysWith(record.key, effects), [
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
   * Runs a script: whole (EVAL, which also caches it) the first time this client sends it, by its SHA-1 after that;
   * whole again when the server has lost it (NOSCRIPT: a restart, a failover, SCRIPT FLUSH). Sent again, up to
   * `attempts` times, when the connection fails before the reply.
   */
  private async run(script: Script, keys: string[], args: string[]): Promise<unknown> {
    await this.ready();
    return this.send(script, keys, args);
  }

  private async send(script: Script, keys: string[], args: string[]): Promise<unknown> {
    const options = { keys, arguments: args };
    for (let attempt = 1; ; attempt++) {
      try {
        if (!this.state.loaded.has(script.sha)) {
          const reply = await this.client.eval(script.source, options);
          this.state.loaded.add(script.sha);
          return reply;
        }
        try {
          return await this.client.evalSha(script.sha, options);
        } catch (error) {
          if (!/^NOSCRIPT\b/.test(messageOf(error))) throw error;
          return await this.client.eval(script.source, options);
        }
      } catch (error) {
        if (isServerReply(error) || attempt >= this.attempts) throw error;
      }
    }
  }

  /** The eviction policy, checked once per client before its first script. */
  private ready(): Promise<void> {
    if (this.evictionCheck === 'skip') return Promise.resolve();
    if (!this.state.checked) {
      this.state.checked = this.checkEvictionPolicy().catch((error: unknown) => {
        // A refusal stands; a connection that failed is tried again by the next call.
        if (!(error instanceof ConfigurationError)) this.state.checked = undefined;
        throw error;
      });
    }
    return this.state.checked;
  }

  private async checkEvictionPolicy(): Promise<void> {
    const policy = String(await this.send(SCRIPTS.evictionPolicy, [this.keys.recoverySet], []));
    if (policy === 'noeviction') return;
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
}

function asArray(reply: unknown): unknown[] {
  if (!Array.isArray(reply)) throw new Error(`unexpected reply from a store script: ${JSON.stringify(reply)}`);
  return reply;
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

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * An error the server replied with (`ERR ...`, `NOSCRIPT ...`, `OOM ...`, `READONLY ...`): an upper-case code
 * first. The client's own errors (a closed socket, a timeout) read as sentences, and only those are sent again.
 */
function isServerReply(error: unknown): boolean {
  return /^[A-Z][A-Z_]+(\s|$)/.test(messageOf(error));
}
