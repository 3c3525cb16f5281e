import { type AddressInfo, connect, createServer, type Socket } from 'node:net';

/**
 * What a rule does to a command it matches.
 * - `drop-reply`: forward it, let Redis run it, then close the client's connection without passing the reply on:
 *   the caller cannot tell whether it landed.
 * - `stall`: the connection goes silent, with no FIN and no RST (a partition, a proxy that stopped forwarding): at
 *   `request` the command never reaches Redis; at `reply` Redis runs it and its reply never comes back. Nothing more
 *   passes that connection either way (replies to the commands before it still do) until `dropConnections()` or
 *   `close()`; the client waits until its own timeout gives up on it.
 */
export type RedisFault = { readonly mode: 'drop-reply' } | { readonly mode: 'stall'; readonly at: 'request' | 'reply' };

/** One command as the client sent it: its arguments, the command's name first (`EVALSHA`, `sha1`, `2`, ...). */
export interface RedisCommand {
  readonly args: readonly string[];
}

export interface RedisCommandMatcher {
  /** How records and failure messages name the commands it matches: `claim of k`. */
  readonly name: string;
  readonly when: (command: RedisCommand) => boolean;
}

export interface RedisFaultRule {
  readonly match: RedisCommandMatcher;
  readonly fault: RedisFault;
  /** How many matching commands draw the fault; later ones pass through untouched. */
  readonly count: number;
}

/** An armed rule, to check afterwards that its fault really fired (a fault that never fired proves nothing). */
export interface ArmedRedisRule {
  fired(): number;
  disarm(): void;
}

export interface RedisFaultProxy {
  /** `redis://127.0.0.1:PORT`: give it to the client under test. */
  readonly url: string;
  arm(rule: RedisFaultRule): ArmedRedisRule;
  /** Commands seen since the last `reset()`, in arrival order: a round trip each for a client that waits for its reply. */
  commands(): RedisCommand[];
  reset(): void;
  /** Closes every connection through it (as a network blip does); the proxy keeps listening. */
  dropConnections(): void;
  close(): Promise<void>;
}

/**
 * A TCP proxy on 127.0.0.1 in front of Redis that reads just enough RESP (2 and 3) to tell commands apart and find
 * the end of each reply: every command is forwarded and run, and a rule can lose its reply. Replies come back in
 * the order of the commands (Redis answers each connection in order), which is how a reply is matched to its command.
 *
 * @example
 * const proxy = await startRedisFaultProxy(redis.url);
 * const lost = proxy.arm({ match: { name: 'any EVALSHA', when: (c) => c.args[0] === 'EVALSHA' }, fault: { mode: 'drop-reply' }, count: 1 });
 */
export async function startRedisFaultProxy(upstreamUrl: string): Promise<RedisFaultProxy> {
  const upstream = new URL(upstreamUrl);
  const armed: { rule: RedisFaultRule; fired: number; disarmed: boolean }[] = [];
  let seen: RedisCommand[] = [];
  const sockets = new Set<Socket>();

  const server = createServer((client) => {
    const redis = connect(Number(upstream.port), upstream.hostname);
    sockets.add(client);
    sockets.add(redis);
    const close = () => {
      client.destroy();
      redis.destroy();
      sockets.delete(client);
      sockets.delete(redis);
    };
    client.on('close', close).on('error', close);
    redis.on('close', close).on('error', close);
    client.pause();
    redis.once('connect', () => client.resume());

    const pending: { fault: RedisFault | undefined }[] = [];
    let fromClient = Buffer.alloc(0);
    let fromRedis = Buffer.alloc(0);
    // A stalled connection: no more commands reach Redis, and (from the stalled reply on) no more replies come back.
    let requestsStopped = false;
    let repliesStopped = false;
    client.on('data', (chunk: Buffer) => {
      fromClient = Buffer.concat([fromClient, chunk]);
      for (;;) {
        const parsed = readCommand(fromClient);
        if (!parsed) break;
        const raw = fromClient.subarray(0, parsed.end);
        fromClient = fromClient.subarray(parsed.end);
        const command: RedisCommand = { args: parsed.args };
        seen.push(command);
        if (requestsStopped) continue;
        const state = armed.find((a) => !a.disarmed && a.fired < a.rule.count && a.rule.match.when(command));
        if (state) state.fired += 1;
        const fault = state?.rule.fault;
        if (fault?.mode === 'stall') requestsStopped = true;
        if (fault?.mode === 'stall' && fault.at === 'request') continue;
        pending.push({ fault });
        redis.write(raw);
      }
    });
    redis.on('data', (chunk: Buffer) => {
      if (repliesStopped) return;
      fromRedis = Buffer.concat([fromRedis, chunk]);
      for (;;) {
        const end = valueEnd(fromRedis, 0);
        if (end < 0) break;
        const raw = fromRedis.subarray(0, end);
        fromRedis = fromRedis.subarray(end);
        const head = pending.shift();
        if (head?.fault?.mode === 'drop-reply') {
          close(); // Redis ran it; the client never hears
          return;
        }
        if (head?.fault?.mode === 'stall') {
          repliesStopped = true; // Redis ran it; the connection stays open, and says nothing more
          return;
        }
        client.write(raw);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}`,
    arm(rule) {
      const state = { rule, fired: 0, disarmed: false };
      armed.push(state);
      return {
        fired: () => state.fired,
        disarm: () => {
          state.disarmed = true;
        },
      };
    },
    commands: () => [...seen],
    reset() {
      seen = [];
    },
    dropConnections() {
      for (const socket of sockets) socket.destroy();
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A whole command at the head of `buffer` (an array of bulk strings, or an inline command), or undefined. */
function readCommand(buffer: Buffer): { args: string[]; end: number } | undefined {
  if (buffer.length === 0) return undefined;
  if (buffer[0] !== 0x2a) {
    const line = buffer.indexOf('\r\n');
    if (line < 0) return undefined;
    return { args: buffer.toString('utf8', 0, line).trim().split(/\s+/), end: line + 2 };
  }
  const header = buffer.indexOf('\r\n');
  if (header < 0) return undefined;
  const count = Number(buffer.toString('latin1', 1, header));
  let offset = header + 2;
  const args: string[] = [];
  for (let i = 0; i < count; i++) {
    const line = buffer.indexOf('\r\n', offset);
    if (line < 0) return undefined;
    const length = Number(buffer.toString('latin1', offset + 1, line));
    const start = line + 2;
    if (buffer.length < start + length + 2) return undefined;
    args.push(buffer.toString('utf8', start, start + length));
    offset = start + length + 2;
  }
  return { args, end: offset };
}

/** Where the RESP value starting at `offset` ends, or -1 when it is not all there yet. */
function valueEnd(buffer: Buffer, offset: number): number {
  if (buffer.length <= offset) return -1;
  const line = buffer.indexOf('\r\n', offset);
  if (line < 0) return -1;
  const type = String.fromCharCode(buffer[offset] ?? 0);
  const head = buffer.toString('latin1', offset + 1, line);
  const after = line + 2;
  switch (type) {
    case '$': // bulk string
    case '!': // bulk error
    case '=': {
      // verbatim string
      const length = Number(head);
      if (length < 0) return after;
      return buffer.length >= after + length + 2 ? after + length + 2 : -1;
    }
    case '*': // array
    case '~': // set
    case '>': // push
    case '%': // map
    case '|': {
      // attribute (followed by the value it annotates)
      const count = Number(head);
      if (count < 0) return after;
      const items = type === '%' || type === '|' ? count * 2 : count;
      let end = after;
      for (let i = 0; i < items; i++) {
        end = valueEnd(buffer, end);
        if (end < 0) return -1;
      }
      return type === '|' ? valueEnd(buffer, end) : end;
    }
    default: // + - : _ , # ( : one line
      return after;
  }
}
