import { randomUUID } from 'node:crypto';
import type { RedisCommand, RedisCommandMatcher } from '@keystone-idempotency/local-aws/redis-fault-proxy';
import { type RedisFaultProxy, startRedisFaultProxy } from '@keystone-idempotency/local-aws/redis-fault-proxy';
import { type RedisLocal, startRedisLocal } from '@keystone-idempotency/local-aws/redis-local';
import { createClient, createClientPool } from '@redis/client';
import { RedisStore, type RedisStoreOptions } from '../../src/redis';
import { SCRIPTS } from '../../src/redis/scripts';

/**
 * Reconnects at once, for five seconds (a server restarting), then gives up, and not at all once the file's server
 * is stopping: a client left reconnecting to a server or proxy that is gone (the fresh copies the store makes of a
 * client whose connection went silent, which inherit this strategy) must not keep the test's process alive.
 */
let stopping = false;
const reconnectStrategy = (retries: number) => (!stopping && retries < 250 ? 20 : false);
const newClient = (url: string, socket: { socketTimeout?: number } = {}) =>
  createClient({ url, socket: { reconnectStrategy, ...socket } });
export type RedisClient = ReturnType<typeof newClient>;
const newPool = (url: string) => createClientPool({ url, socket: { reconnectStrategy } }, { minimum: 1, maximum: 8 });
export type RedisPool = ReturnType<typeof newPool>;

/**
 * A client on `url` that reconnects at once and never crashes the test on a connection error; `socketTimeout` closes
 * (and reconnects) a socket silent for that long, as the README's client does.
 */
export async function redisClient(url: string, socket: { socketTimeout?: number } = {}): Promise<RedisClient> {
  const client = newClient(url, socket);
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/**
 * A real redis-server of the file's own (started on a free port, stopped after), a fault proxy in front of it, and
 * clients: `direct` to the server for reads behind the store's back, `proxied` through the proxy, whose commands it
 * counts and whose replies it can lose. The server keeps an append-only file fsynced on every write (on a tmpfs, so
 * at no cost), as the store requires by default. Registers its beforeAll/afterAll hooks where it is called.
 */
export function testRedis(options: { appendOnly?: boolean } = {}) {
  let server: RedisLocal;
  let proxy: RedisFaultProxy;
  let direct: RedisClient;
  let proxied: RedisClient;
  const extra: (RedisClient | RedisPool)[] = [];
  /** Each file's stores under a prefix of its own: no file sees another's recovery set. */
  const prefix = `test-${randomUUID().slice(0, 8)}`;
  beforeAll(async () => {
    server = await startRedisLocal({ appendOnly: options.appendOnly ?? true });
    proxy = await startRedisFaultProxy(server.url);
    direct = await redisClient(server.url);
    proxied = await redisClient(proxy.url);
  });
  afterAll(async () => {
    stopping = true;
    // Destroyed, not closed: a client whose connection a test made silent would wait for its reply for ever.
    for (const client of [direct, proxied, ...extra]) client?.destroy();
    await proxy?.close();
    await server?.stop();
  });
  return {
    prefix,
    get server() {
      return server;
    },
    get proxy() {
      return proxy;
    },
    /** A client straight to the server. */
    get direct() {
      return direct;
    },
    /** The client through the proxy. */
    get proxied() {
      return proxied;
    },
    /** Another client through the proxy (its own connection, its own scripts loaded), closed after the file. */
    async newProxiedClient(): Promise<RedisClient> {
      const client = await redisClient(proxy.url);
      extra.push(client);
      return client;
    },
    /**
     * A pool of clients through the proxy: each command has a connection to itself while it runs, as each request
     * to DynamoDB or PostgreSQL does, so a reply lost on one (its connection closed) takes no other command's with it.
     * Closed after the file.
     */
    async newProxiedPool(): Promise<RedisPool> {
      const pool = newPool(proxy.url);
      pool.on('error', () => undefined);
      await pool.connect();
      extra.push(pool);
      return pool;
    },
    /** A store through the proxy, under the file's prefix unless told otherwise. */
    store(settings: Partial<RedisStoreOptions> = {}): RedisStore {
      return new RedisStore({ client: proxied, prefix, leaseSeconds: 30, ...settings });
    },
    /** An effect key of the file's prefix. */
    key(name: string, under = prefix): string {
      return `{${under}}:${name}`;
    },
  };
}

/** The store's scripts as the proxy sees them: by SHA-1 (EVALSHA) or by source (EVAL). */
function scriptOf(command: RedisCommand): string | undefined {
  const [name, body] = command.args;
  if (name?.toUpperCase() === 'EVALSHA') return Object.values(SCRIPTS).find((s) => s.sha === body)?.name;
  if (name?.toUpperCase() === 'EVAL') return Object.values(SCRIPTS).find((s) => s.source === body)?.name;
  return undefined;
}

/**
 * What a store script call is, however it was sent: the script's name, its keys and its arguments. The store sends
 * a script whole (EVAL) until its client has loaded it, by SHA-1 (EVALSHA) after, so a call sent again may be sent
 * the other way: the same call all the same.
 */
export function scriptCallOf(command: RedisCommand): string | undefined {
  const script = scriptOf(command);
  return script === undefined ? undefined : JSON.stringify([script, ...command.args.slice(2)]);
}

/** A script's ARGV (after the keys). */
function argvOf(command: RedisCommand): readonly string[] {
  const keys = Number(command.args[2]);
  return command.args.slice(3 + keys);
}

/**
 * The store's commands by step, told apart by the script and its arguments: a claim is the place script with no lease
 * token seen, a takeover with one; a release is the end-lease script setting RELEASED; a commit (with effects or
 * without, "completion") is the commit script. If a step changes shape, its matcher stops matching, the fault never
 * fires, and the test that armed it fails on `fired()`.
 */
export function redisEngineCommands() {
  const on =
    (script: string, key: string, also: (argv: readonly string[]) => boolean = () => true) =>
    (command: RedisCommand) =>
      scriptOf(command) === script && argvOf(command)[0] === key && also(argvOf(command));
  const completion = (key: string): RedisCommandMatcher => ({ name: `completion of ${key}`, when: on('commit', key) });
  /** A commit: the commit script, or a one-shot commit (the place script writing a completed record). */
  const commit = (key: string): RedisCommandMatcher => ({
    name: `commit of ${key}`,
    when: (c) => on('commit', key)(c) || on('place', key, (argv) => argv.includes('COMPLETED'))(c),
  });
  return {
    claim: (key: string): RedisCommandMatcher => ({
      name: `claim of ${key}`,
      when: on('place', key, (argv) => argv[2] === '' && argv.at(-1) === '0'),
    }),
    takeover: (key: string): RedisCommandMatcher => ({
      name: `takeover of ${key}`,
      when: on('place', key, (argv) => argv[2] !== ''),
    }),
    release: (key: string): RedisCommandMatcher => ({
      name: `release of ${key}`,
      when: on('endLease', key, (argv) => argv[3] === 'RELEASED'),
    }),
    commit,
    completion,
    oneShot: (key: string): RedisCommandMatcher => ({ name: `one-shot commit of ${key}`, when: on('place', key) }),
    read: (key: string): RedisCommandMatcher => ({
      name: `read of ${key}`,
      when: (c) => scriptOf(c) === 'read' && c.args[3]?.endsWith(key) === true,
    }),
    /** Any of the store's scripts. */
    any: (): RedisCommandMatcher => ({ name: 'any store script', when: (c) => scriptOf(c) !== undefined }),
  };
}
