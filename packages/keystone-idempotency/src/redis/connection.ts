import { ConfigurationError, IdempotencyError } from '../engine/index.js';

/**
 * The two commands the store sends, as `@redis/client` names them: a connected `createClient()` or `createCluster()`
 * has both (the cluster routes each by its first key, the record's, so every script runs on the shard of the store's
 * hash slot). Another client fits behind ten lines that call its own EVAL and EVALSHA.
 */
export interface RedisScriptClient {
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  evalSha(sha1: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
}

/** One connection that sends a plain command: a `@redis/client` client, or one a pool or a cluster hands out. */
interface OneConnection {
  sendCommand(args: string[]): Promise<unknown>;
}

/** What the store uses of `@redis/client` beyond EVAL and EVALSHA, when the client has it. */
interface Pool {
  execute<T>(task: (client: OneConnection) => Promise<T>): Promise<T>;
}
interface Cluster {
  getNodeClientForKey(key: string): Promise<OneConnection>;
}
interface Copy extends RedisScriptClient {
  connect(): Promise<unknown>;
  destroy(): void;
  on(event: 'error', listener: (error: unknown) => void): unknown;
  unref?(): void;
}
interface Copyable {
  duplicate(): Copy;
}

const has = <K extends string>(value: unknown, name: K): value is Record<K, (...args: never[]) => unknown> =>
  typeof (value as Record<string, unknown> | null)?.[name] === 'function';

/**
 * A plain command (CONFIG GET, WAIT) on one connection to the node that holds `key`'s slot: a pool's connection for
 * the task, a cluster's node client, or the client itself. WAIT counts the writes of the connection it is sent on.
 */
export async function onOneConnection<T>(
  client: RedisScriptClient,
  key: string,
  task: (connection: OneConnection) => Promise<T>,
): Promise<T> {
  if (has(client, 'execute')) return (client as unknown as Pool).execute(task);
  if (has(client, 'getNodeClientForKey')) return task(await (client as unknown as Cluster).getNodeClientForKey(key));
  if (has(client, 'sendCommand')) return task(client as unknown as OneConnection);
  throw new ConfigurationError(
    "the Redis client has no sendCommand (as @redis/client's createClient, createClientPool and createCluster have): " +
      'the store can neither read appendfsync nor send WAIT through it',
  );
}

/** Whether {@link onOneConnection} can send a plain command through the client. */
export function sendsPlainCommands(client: RedisScriptClient): boolean {
  return has(client, 'execute') || has(client, 'getNodeClientForKey') || has(client, 'sendCommand');
}

/** A connection the store's scripts go on, and whether the store made it (a fresh one) or was given it. */
interface Connection {
  readonly client: RedisScriptClient;
  readonly ready: Promise<void>;
  readonly fresh: boolean;
}

/**
 * What the store keeps per client it is given, shared by every store on it: the connection its scripts go on (the
 * client itself until a reply failed to come on it, then a fresh copy), the scripts sent whole (EVAL caches them on
 * the server), and each store's server check, by what the store requires.
 */
export interface ClientState {
  readonly given: RedisScriptClient;
  current: Connection;
  readonly loaded: Set<string>;
  readonly checks: Map<string, Promise<void>>;
}

const clients = new WeakMap<RedisScriptClient, ClientState>();

export function stateOf(client: RedisScriptClient): ClientState {
  let state = clients.get(client);
  if (!state) {
    state = {
      given: client,
      current: { client, ready: Promise.resolve(), fresh: false },
      loaded: new Set(),
      checks: new Map(),
    };
    clients.set(client, state);
  }
  return state;
}

/**
 * A call's time: until its deadline, and never more than {@link CALL_TIMEOUT_MS} (a script runs in well under a
 * millisecond; ten seconds without a reply is a connection that will not answer).
 */
const CALL_TIMEOUT_MS = 10_000;

export function callEnd(deadline: number | undefined): number {
  const cap = Date.now() + CALL_TIMEOUT_MS;
  return deadline === undefined ? cap : Math.min(deadline, cap);
}

type Settled<T> = { kind: 'value'; value: T } | { kind: 'error'; error: unknown } | { kind: 'timeout' };

/** The promise's outcome, or `timeout` after `ms`: a reply that comes later is dropped. */
async function within<T>(ms: number, promise: Promise<T>): Promise<Settled<T>> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<Settled<T>>((resolve) => {
    timer = setTimeout(() => resolve({ kind: 'timeout' }), ms);
  });
  try {
    return await Promise.race([
      promise.then(
        (value): Settled<T> => ({ kind: 'value', value }),
        (error: unknown): Settled<T> => ({ kind: 'error', error }),
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs `send` on the client's current connection, again (up to `attempts` sendings in all) when the connection
 * failed before the reply or the reply did not come in the sending's share of the call's time (what is left, split
 * over the sendings left). A connection whose reply did not come is not used again: the next sending goes on a fresh
 * copy of the client (`duplicate()`; a pool hands it another connection by itself). An error the server replied with
 * is never sent again. Past `end`, nothing is sent, and a call that got no reply fails with an `IdempotencyError`:
 * its write may have landed, and a retry recognises it by its lease token.
 */
export async function sendWithin<T>(
  state: ClientState,
  end: number,
  attempts: number,
  send: (client: RedisScriptClient, timeLeftMs: number) => Promise<T>,
): Promise<T> {
  let failure: unknown;
  let silent = 0;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const left = end - Date.now();
    if (left <= 0) break;
    const share = Math.max(1, Math.floor(left / (attempts - attempt + 1)));
    const connection = state.current;
    const outcome = await within(
      share,
      connection.ready.then(() => send(connection.client, share)),
    );
    if (outcome.kind === 'value') return outcome.value;
    if (outcome.kind === 'timeout') {
      silent += 1;
      failure = undefined;
      replace(state, connection);
      continue;
    }
    const { error } = outcome;
    if (isServerReply(error) || error instanceof IdempotencyError) throw error;
    failure = error;
    // A fresh connection that could not connect: make another for the next sending.
    if (connection.fresh && (await within(0, connection.ready)).kind === 'error') replace(state, connection);
  }
  if (failure !== undefined) throw failure;
  throw new IdempotencyError(
    silent === 0
      ? 'the call ran out of time before Redis could be asked'
      : `no reply from Redis in the call's time (${silent} sending${silent === 1 ? '' : 's'}): ` +
          'the write may have landed; retry, and it is recognised as the same call',
  );
}

/** Waits for `promise` until `end` (epoch ms), then gives up on it with a retryable `IdempotencyError`. */
export async function waitUntil<T>(end: number, promise: Promise<T>): Promise<T> {
  const outcome = await within(Math.max(0, end - Date.now()), promise);
  if (outcome.kind === 'value') return outcome.value;
  if (outcome.kind === 'error') throw outcome.error;
  throw new IdempotencyError("the server's check did not end in the call's time: retry");
}

/** Stops using a connection whose reply did not come: the next sending goes on a fresh copy of the client. */
function replace(state: ClientState, stalled: Connection): void {
  if (state.current !== stalled || !has(state.given, 'duplicate')) return;
  if (stalled.fresh) (stalled.client as Copy).destroy();
  const copy = (state.given as unknown as Copyable).duplicate();
  // Its failures reach the store's calls as rejections; an 'error' event with no listener would end the process.
  copy.on('error', () => undefined);
  const ready = copy.connect().then(() => copy.unref?.());
  ready.catch(() => undefined);
  state.current = { client: copy, ready, fresh: true };
}

/**
 * An error the server replied with (`ERR ...`, `NOSCRIPT ...`, `OOM ...`, `READONLY ...`): an upper-case code
 * first. The client's own errors (a closed socket, a timeout) read as sentences, and only those are sent again.
 */
export function isServerReply(error: unknown): boolean {
  return /^[A-Z][A-Z_]+(\s|$)/.test(messageOf(error));
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
