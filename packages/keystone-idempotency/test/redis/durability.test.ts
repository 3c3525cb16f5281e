import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { type RedisCommand, startRedisFaultProxy } from '@keystone-idempotency/local-aws/redis-fault-proxy';
import { type RedisLocal, type RedisLocalOptions, startRedisLocal } from '@keystone-idempotency/local-aws/redis-local';
import { createClient, RESP_TYPES } from '@redis/client';
import { ConfigurationError, IdempotencyError, type Lease, type StoredResponse, scopedKey } from '../../src/engine';
import { RedisStore, type RedisStoreOptions } from '../../src/redis';
import { type RedisClient, redisClient, redisEngineCommands } from '../support/redis';

/**
 * Persistence, checked as the eviction policy is: a server that can lose a write it acknowledged is refused before
 * the store's first command, unless every write is waited for on replicas (WAIT) or the caller vouches for the server.
 * Each case runs its own redis-servers; the crash test fsyncs to a real disk.
 */
const created: StoredResponse = { statusCode: 201, body: '{"id":"pay_1"}', headers: {} };
const newKey = () => scopedKey({ accountId: 'acct_durability', operation: 'POST /payments', key: randomUUID() });
const prefix = `durability-${randomUUID().slice(0, 8)}`;

const started: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const thing of started.splice(0).reverse()) await thing.close().catch(() => undefined);
});

async function server(options: RedisLocalOptions = {}): Promise<RedisLocal> {
  const s = await startRedisLocal(options);
  started.push({ close: () => s.stop() });
  return s;
}

async function client(url: string): Promise<RedisClient> {
  const c = await redisClient(url);
  started.push(c);
  return c;
}

const store = (c: RedisClient, options: Partial<RedisStoreOptions> = {}) =>
  new RedisStore({ client: c, prefix, leaseSeconds: 30, ...options });

async function acquire(s: RedisStore, key: string): Promise<Lease> {
  const outcome = await s.claim(key, 'fp');
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

describe('the store refuses, before its first command, a server that can lose an acknowledged write', () => {
  it.each([
    ['appendonly no', { appendOnly: false }, /keeps no append-only file/],
    ["appendfsync everysec (Redis's default)", { settings: { appendfsync: 'everysec' } }, /appendfsync is everysec/],
    ['appendfsync no', { settings: { appendfsync: 'no' } }, /appendfsync is no/],
    ['CONFIG blocked, as on ElastiCache', { settings: { 'rename-command': ['CONFIG', ''] } }, /could not read/],
  ] as const)('%s: a ConfigurationError, nothing written; accepted when vouched for', async (_, settings, why) => {
    const redis = await server(settings);
    const c = await client(redis.url);
    const key = newKey();
    const refused = store(c);
    await expect(refused.claim(key, 'fp')).rejects.toThrow(ConfigurationError);
    await expect(refused.claim(key, 'fp')).rejects.toThrow(why);
    expect(await c.dbSize()).toBe(0);
    // durability: 'unchecked' is the explicit opt-out: the caller vouches for the server.
    expect((await store(c, { durability: 'unchecked' }).claim(key, 'fp')).kind).toBe('acquired');
  });

  it('is checked when the eviction check is skipped, and says what to do', async () => {
    const redis = await server({ appendOnly: false });
    const c = await client(redis.url);
    await expect(store(c, { evictionCheck: 'skip' }).claim(newKey(), 'fp')).rejects.toThrow(
      'run it with appendonly yes and appendfsync always, or pass durability: { replicas, timeoutMs } to WAIT for ' +
        "replicas after each write, or durability: 'unchecked' if it is durable by other means",
    );
  });

  it.each([
    ['an object', {}],
    ['a Map', { [RESP_TYPES.MAP]: Map }],
    ['pairs in an array', { [RESP_TYPES.MAP]: Array }],
  ] as const)('reads appendfsync from a client that maps replies to %s', async (_, typeMapping) => {
    const everysec = await server({ settings: { appendfsync: 'everysec' } });
    const always = await server();
    const mapped = async (url: string) => {
      const c = createClient({ url, commandOptions: { typeMapping } });
      await c.connect();
      started.push(c);
      return c;
    };
    await expect(store(await mapped(everysec.url)).claim(newKey(), 'fp')).rejects.toThrow(/appendfsync is everysec:/);
    expect((await store(await mapped(always.url)).claim(newKey(), 'fp')).kind).toBe('acquired');
  });

  it('a check whose reply was lost is not a refusal: the call fails retryably, and the next checks again', async () => {
    const redis = await server();
    const proxy = await startRedisFaultProxy(redis.url);
    started.push(proxy);
    const c = await client(proxy.url);
    const lost = proxy.arm({
      match: { name: 'CONFIG GET appendfsync', when: (command) => command.args.join(' ') === 'CONFIG GET appendfsync' },
      fault: { mode: 'drop-reply' },
      count: 1,
    });
    const s = store(c, { attempts: 1, deadline: () => Date.now() + 1_000 });
    const error = await s.claim(newKey(), 'fp').catch((e: unknown) => e);
    expect(lost.fired()).toBe(1);
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(ConfigurationError);
    expect((await s.claim(newKey(), 'fp')).kind).toBe('acquired');
  });

  it('accepts appendonly yes with appendfsync always', async () => {
    const redis = await server();
    const c = await client(redis.url);
    expect((await store(c).claim(newKey(), 'fp')).kind).toBe('acquired');
  });
});

describe('appendfsync always, on a disk', () => {
  it('a SIGKILL right after acknowledged commits loses none of them, records or effects (3 runs of 64)', async () => {
    const redis = await server({ parentDir: tmpdir() });
    const c = await client(redis.url);
    const s = store(c);
    for (let run = 0; run < 3; run++) {
      const keys = Array.from({ length: 64 }, newKey);
      const count = s.effectKey(`charges:${run}`);
      await Promise.all(
        keys.map(async (key) =>
          s.commit(await acquire(s, key), created, [
            { incrBy: count, by: 1 },
            { hset: s.effectKey(`charge:${key}`), field: 'id', value: key },
          ]),
        ),
      );
      await redis.restart({ signal: 'SIGKILL' }); // at once, the last reply barely sent
      for (const key of keys) expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
      expect(await c.get(count)).toBe('64');
    }
  });
});

describe('durability: { replicas, timeoutMs }: WAIT after every write', () => {
  /** A primary without an append-only file, a replica of it, and a proxy in front of the primary. */
  async function replicated() {
    // A replica's first sync waits repl-diskless-sync-delay (5 s by default) for others to join it: none will.
    const primary = await server({ appendOnly: false, settings: { 'repl-diskless-sync-delay': '0' } });
    const replica = await server({ appendOnly: false, settings: { replicaof: ['127.0.0.1', String(primary.port)] } });
    const proxy = await startRedisFaultProxy(primary.url);
    started.push(proxy);
    const toReplica = await client(replica.url);
    const toPrimary = await client(primary.url);
    await online(toPrimary);
    return { primary, replica, proxy, toReplica, toPrimary, c: await client(proxy.url) };
  }
  /** Until the primary counts its replica online (synced, acknowledging). */
  async function online(toPrimary: RedisClient) {
    for (let i = 0; i < 400 && !/slave0:.*state=online/.test(await toPrimary.info('replication')); i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
  // A replica's acknowledgement is a round trip or two; the time is generous for a loaded machine.
  const waiting = { replicas: 1, timeoutMs: 3000 };
  /** The store's commands, in order: its scripts (whole or by SHA-1), and plain ones (not the client's handshake). */
  const sent = (commands: readonly RedisCommand[]) =>
    commands
      .map((command) => (redisEngineCommands().any().when(command) ? 'script' : command.args[0]))
      .filter((name) => name === 'script' || name === 'SET' || name === 'WAIT');

  it('accepts a primary with no append-only file, and each write is on the replica before the call answers', async () => {
    const { proxy, toReplica, c } = await replicated();
    await expect(store(c).get(newKey())).rejects.toThrow(/keeps no append-only file/); // without WAIT: refused
    const s = store(c, { durability: waiting });
    const key = newKey();
    const lease = await acquire(s, key);
    expect(await toReplica.hGet(s.recordKey(key), 'status')).toBe('IN_PROGRESS');
    proxy.reset();
    await s.commit(lease, created, [{ set: s.effectKey(`done:${key}`), value: '1' }]);
    expect(sent(proxy.commands())).toEqual(['script', 'SET', 'WAIT']);
    expect(await toReplica.hGet(s.recordKey(key), 'status')).toBe('COMPLETED');
    expect(await toReplica.get(s.effectKey(`done:${key}`))).toBe('1');
  });

  it('a write no replica acknowledged in time fails the call (retryable); the retry recognises it', async () => {
    const { toReplica, toPrimary, c, primary } = await replicated();
    const s = store(c, { durability: waiting });
    const key = newKey();
    const lease = await acquire(s, key);
    await toReplica.sendCommand(['REPLICAOF', 'NO', 'ONE']); // the replica gone
    const impatient = store(c, { durability: { replicas: 1, timeoutMs: 500 } });
    const started = Date.now();
    const error = await impatient.commit(lease, created).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IdempotencyError);
    expect(String(error)).toMatch(/reached 0 of the 1 replicas/);
    expect(Date.now() - started).toBeLessThan(2_000);
    await toReplica.sendCommand(['REPLICAOF', '127.0.0.1', String(primary.port)]);
    await online(toPrimary);
    await s.commit(lease, created); // the caller's retry: its own completion, now on the replica
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
    expect(await toReplica.hGet(s.recordKey(key), 'status')).toBe('COMPLETED');
  });

  it('a write sent again after a lost reply meets its own: waited for all the same', async () => {
    const { proxy, c } = await replicated();
    const s = store(c, { durability: waiting });
    const key = newKey();
    const lease = await acquire(s, key);
    proxy.arm({ match: redisEngineCommands().commit(key), fault: { mode: 'drop-reply' }, count: 1 });
    proxy.reset();
    await s.commit(lease, created);
    // The first sending's reply lost, the second meets the completion it wrote; a write of its own and WAIT follow.
    expect(sent(proxy.commands())).toEqual(['script', 'script', 'SET', 'WAIT']);
  });

  it('a claim that meets the record of another owner waits for no replica: in flight at once', async () => {
    const { c } = await replicated();
    const key = newKey();
    await acquire(store(c, { durability: waiting }), key);
    // Two replicas asked for, one there: any WAIT of this store would fail the call.
    const s = store(c, { durability: { replicas: 2, timeoutMs: 300 } });
    expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'in_flight' });
    await expect(s.claim(newKey(), 'fp')).rejects.toThrow(/reached 1 of the 2 replicas it needs within \d+ ms/);
  });

  it("asks WAIT for no longer than the call's time allows, less a margin for Redis's timer and the reply", async () => {
    const { proxy, c } = await replicated();
    const deadline = Date.now() + 1_500;
    const s = store(c, { attempts: 1, durability: { replicas: 2, timeoutMs: 10_000 }, deadline: () => deadline });
    // Each WAIT as the proxy sees it arrive: its timeout, and the time the call had left then.
    const waits: { timeoutMs: number; leftMs: number }[] = [];
    proxy.arm({
      match: {
        name: 'WAIT',
        when: (command) => {
          if (command.args[0] === 'WAIT')
            waits.push({ timeoutMs: Number(command.args[2]), leftMs: deadline - Date.now() });
          return false;
        },
      },
      fault: { mode: 'drop-reply' },
      count: 1,
    });
    const error = await s.claim(newKey(), 'fp').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IdempotencyError); // one replica of the two: retryable, by the replicas or the deadline
    expect(Date.now()).toBeLessThan(deadline + 500);
    expect(waits).toHaveLength(1);
    const [wait] = waits;
    // Asked for what the call had left less 150 ms (measured when the store sent it, a moment before the proxy saw
    // it): Redis answers a timed-out WAIT up to 100 ms late, and the answer must come within the call's time.
    expect(wait!.timeoutMs).toBeGreaterThan(0);
    expect(wait!.timeoutMs).toBeLessThanOrEqual(wait!.leftMs - 50);
  });

  it('a SIGKILL of the primary, the replica promoted: every acknowledged commit is there', async () => {
    const { primary, toReplica, c } = await replicated();
    const s = store(c, { durability: waiting });
    const keys = Array.from({ length: 32 }, newKey);
    await Promise.all(
      keys.map(async (key) => s.commit(await acquire(s, key), created, [{ incrBy: s.effectKey('charges'), by: 1 }])),
    );
    await primary.restart({ signal: 'SIGKILL' }); // it comes back empty (no append-only file): lost without the replica
    expect(await c.dbSize()).toBe(0);
    await toReplica.sendCommand(['REPLICAOF', 'NO', 'ONE']);
    const promoted = store(toReplica, { durability: 'unchecked' });
    for (const key of keys)
      expect(await promoted.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
    expect(await toReplica.get(s.effectKey('charges'))).toBe('32');
  });
});
