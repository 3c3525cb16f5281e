import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';

/**
 * What a rule does to a request it matches.
 * - `drop-reply`: forward it, let PostgreSQL run it to the end (for a COMMIT, or a statement outside a transaction:
 *   commit it), then close the client's connection without passing the reply on: the caller cannot tell whether it
 *   landed.
 * - `delay-reply`: forward it, and hold PostgreSQL's reply for `ms` before passing it on (and every reply behind it).
 * - `stall`: the connection goes silent from this request on, as over a partition or a proxy that stopped
 *   forwarding: neither it nor anything the client sends after it reaches PostgreSQL, and when the client gives up
 *   and closes, PostgreSQL is not told (its session stays, idle, holding what its transaction holds). It ends when
 *   the rule's `release()` forwards what was held (and then closes, if the client is gone), when its `cut()` closes
 *   the connection to PostgreSQL, or when PostgreSQL itself ends the session (an idle-in-transaction timeout).
 */
export type Fault =
  | { readonly mode: 'drop-reply' }
  | { readonly mode: 'delay-reply'; readonly ms: number }
  | { readonly mode: 'stall' };

/**
 * One request as the client sent it: a simple query, or an extended-protocol exchange up to its Sync (a statement
 * with its parameters). `transaction` holds the requests before it in the transaction it belongs to on its
 * connection (from the BEGIN on; empty outside one), so a rule can match "the COMMIT of the transaction that wrote
 * X".
 */
export interface WireRequest {
  readonly text: string;
  /** Parameters in text form (a binary one decoded as UTF-8; null for NULL). */
  readonly params: readonly (string | null)[];
  readonly transaction: readonly WireRequest[];
}

/** Which requests a rule applies to. */
export interface RequestMatcher {
  /** How records and failure messages name the requests it matches: `COMMIT of the completion of k`. */
  readonly name: string;
  readonly when: (request: WireRequest) => boolean;
}

export interface FaultRule {
  readonly match: RequestMatcher;
  readonly fault: Fault;
  /** How many matching requests draw the fault; later ones pass through untouched. */
  readonly count: number;
}

/** An armed rule, to check afterwards that its fault really fired (a fault that never fired proves nothing). */
export interface ArmedRule {
  readonly rule: FaultRule;
  fired(): number;
  /** Stops it from firing again. */
  disarm(): void;
  /** Ends its stalls: what was held goes to PostgreSQL, in order (a held COMMIT commits). */
  release(): void;
  /** Ends its stalls by closing their connections to PostgreSQL: a held transaction rolls back. */
  cut(): void;
  /** How many of its stalls are still going on. */
  stalled(): number;
}

/** One request the proxy saw, and what became of its reply. */
export interface ProxiedRequest extends WireRequest {
  readonly rule: string | undefined;
  readonly outcome: 'answered' | 'dropped' | 'pending';
}

export interface PostgresFaultProxy {
  /** The upstream connection string with the proxy's address: give it to the pool under test. */
  readonly url: string;
  arm(rule: FaultRule): ArmedRule;
  /** Every request seen so far, in arrival order; with a matcher, only those it matches. */
  requests(match?: RequestMatcher): ProxiedRequest[];
  /** The local ports of its connections to PostgreSQL, as `pg_stat_activity.client_port` shows them. */
  upstreamPorts(): number[];
  /** Stops listening and closes every connection. */
  close(): Promise<void>;
}

interface ArmedState {
  readonly rule: FaultRule;
  fired: number;
  disarmed: boolean;
  readonly stalls: Set<Stall>;
}

/** A connection gone silent: what its client sent since, and the ways to end it. */
interface Stall {
  release(): void;
  cut(): void;
}

interface Pending {
  readonly record: { -readonly [K in keyof ProxiedRequest]: ProxiedRequest[K] };
  readonly fault: Fault | undefined;
  readonly reply: Buffer[];
}

/**
 * A TCP proxy on 127.0.0.1 in front of PostgreSQL that understands just enough of its wire protocol (version 3) to
 * tell requests apart and find the end of each reply (its ReadyForQuery): every request is forwarded and run, and a
 * rule can lose its reply or hold it back. This is how a test makes the faults of a real network happen on demand,
 * under the real driver and against the real database: the reply to a COMMIT lost after the transaction committed,
 * a claim whose answer never comes back, a slow server.
 *
 * @example
 * const proxy = await startPostgresFaultProxy(process.env.POSTGRES_URL!);
 * const commit = { name: 'any COMMIT', when: (request: WireRequest) => request.text === 'COMMIT' };
 * const lost = proxy.arm({ match: commit, fault: { mode: 'drop-reply' }, count: 1 });
 * // ... run the code under test with a pool on proxy.url ...
 * expect(lost.fired()).toBe(1);
 */
export async function startPostgresFaultProxy(upstreamUrl: string): Promise<PostgresFaultProxy> {
  const upstream = new URL(upstreamUrl);
  const armed: ArmedState[] = [];
  const seen: Pending['record'][] = [];
  const sockets = new Set<Socket>();
  const upstreams = new Set<Socket>();

  const server: Server = createServer((client) => {
    const server = connect(Number(upstream.port), upstream.hostname);
    sockets.add(client);
    sockets.add(server);
    upstreams.add(server);
    server.on('close', () => upstreams.delete(server));
    let stall: { readonly state: ArmedState; readonly held: Buffer[]; readonly self: Stall } | undefined;
    const close = () => {
      client.destroy();
      server.destroy();
      if (stall) stall.state.stalls.delete(stall.self);
    };
    // A stalled connection's client may go: PostgreSQL is not told, as across a partition.
    const clientGone = () => {
      if (stall) client.destroy();
      else close();
    };
    client.on('close', clientGone).on('error', clientGone);
    server.on('close', close).on('error', close);
    const startStall = (state: ArmedState) => {
      const self: Stall = {
        release: () => {
          if (!stall) return;
          const { held } = stall;
          state.stalls.delete(self);
          stall = undefined;
          for (const raw of held) server.write(raw);
          if (client.destroyed) server.end();
        },
        cut: () => {
          state.stalls.delete(self);
          stall = undefined;
          close();
        },
      };
      stall = { state, held: [], self };
      state.stalls.add(self);
    };
    /** Messages of the exchange being read, forwarded once its end (Sync, or a simple query) has been matched. */
    let outgoing: Buffer[] = [];
    const forward = (raw: Buffer) => {
      if (stall) stall.held.push(raw);
      else server.write(raw);
    };
    client.pause(); // until the server is reachable: nothing is lost meanwhile
    server.once('connect', () => client.resume());

    const pending: Pending[] = [];
    let transaction: WireRequest[] = [];
    let replies = Promise.resolve(); // replies leave in order, however long some are held
    let ready = false; // past the startup exchange (the first ReadyForQuery)
    let exchange = { texts: [] as string[], params: [] as (string | null)[], parsed: undefined as string | undefined };
    // Named (prepared) statements' texts, by name: pg sends a name's Parse once per connection, and from then on
    // only a Bind that names it, so a request is matched on the text the name stands for.
    const prepared = new Map<string, string>();

    const request = (text: string, params: readonly (string | null)[]) => {
      const wire: WireRequest = { text, params, transaction: [...transaction] };
      const keyword = text.trim().split(/\s+/)[0]?.toUpperCase();
      if (keyword === 'BEGIN' || keyword === 'START') transaction = [wire];
      else if (keyword === 'COMMIT' || keyword === 'ROLLBACK' || keyword === 'END') transaction = [];
      else if (transaction.length > 0) transaction.push(wire);
      const state = stall
        ? undefined
        : armed.find((a) => !a.disarmed && a.fired < a.rule.count && a.rule.match.when(wire));
      if (state) state.fired += 1;
      if (state?.rule.fault.mode === 'stall') startStall(state);
      const record = { ...wire, rule: state?.rule.match.name, outcome: 'pending' as ProxiedRequest['outcome'] };
      seen.push(record);
      pending.push({ record, fault: state?.rule.fault, reply: [] });
    };

    const fromClient = new MessageReader(true, (type, body, raw) => {
      if (!ready) {
        server.write(raw); // the startup exchange
        return;
      }
      outgoing.push(raw);
      if (type === 'P') {
        const name = cString(body, 0);
        const text = cString(body, name.end).value;
        if (name.value !== '') prepared.set(name.value, text);
        exchange.texts.push(text);
        exchange.parsed = name.value;
      } else if (type === 'B') {
        const statement = cString(body, cString(body, 0).end).value;
        if (statement !== '' && statement !== exchange.parsed) exchange.texts.push(prepared.get(statement) ?? '');
        exchange.params = bindParams(body);
      } else if (type === 'Q') request(cString(body, 0).value, []);
      else if (type === 'S') {
        request(exchange.texts.join('; '), exchange.params);
        exchange = { texts: [], params: [], parsed: undefined };
      }
      // Held until the request is whole and matched, so that a stall holds all of it.
      if (type === 'Q' || type === 'S' || type === 'X') {
        for (const message of outgoing) forward(message);
        outgoing = [];
      }
    });
    const fromServer = new MessageReader(false, (type, _body, raw) => {
      if (!ready) {
        client.write(raw);
        if (type === 'Z') ready = true;
        return;
      }
      const head = pending[0];
      if (!head) {
        client.write(raw); // nothing asked (a notice between requests)
        return;
      }
      head.reply.push(raw);
      if (type !== 'Z') return;
      pending.shift();
      if (head.fault?.mode === 'drop-reply') {
        // After the replies before it have gone out.
        replies = replies.then(() => {
          head.record.outcome = 'dropped';
          close();
        });
        return;
      }
      const delay = head.fault?.mode === 'delay-reply' ? head.fault.ms : 0;
      replies = replies.then(async () => {
        // Unref'd: a reply held for a connection that is gone (the proxy closed) must not keep the process alive.
        if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay).unref());
        head.record.outcome = 'answered';
        if (!client.destroyed) client.write(Buffer.concat(head.reply));
      });
    });
    client.on('data', (chunk: Buffer) => fromClient.push(chunk));
    server.on('data', (chunk: Buffer) => fromServer.push(chunk));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const url = new URL(upstreamUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);

  return {
    url: url.toString(),
    arm(rule) {
      const state: ArmedState = { rule, fired: 0, disarmed: false, stalls: new Set() };
      armed.push(state);
      return {
        rule,
        fired: () => state.fired,
        disarm: () => {
          state.disarmed = true;
        },
        release: () => {
          for (const stall of [...state.stalls]) stall.release();
        },
        cut: () => {
          for (const stall of [...state.stalls]) stall.cut();
        },
        stalled: () => state.stalls.size,
      };
    },
    requests(match) {
      return seen.filter((record) => !match || match.when(record)).map((record) => ({ ...record }));
    },
    upstreamPorts() {
      return [...upstreams].map((socket) => socket.localPort).filter((port): port is number => port !== undefined);
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Splits a byte stream into protocol messages: a type byte, then a length that counts itself. The first message a
 * client sends (the startup message) has no type byte.
 */
class MessageReader {
  private buffer = Buffer.alloc(0);
  private untyped: boolean;

  constructor(
    fromClient: boolean,
    private readonly onMessage: (type: string, body: Buffer, raw: Buffer) => void,
  ) {
    this.untyped = fromClient;
  }

  push(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const headerLength = this.untyped ? 0 : 1;
      if (this.buffer.length < headerLength + 4) return;
      const length = this.buffer.readInt32BE(headerLength);
      const total = headerLength + length;
      if (this.buffer.length < total) return;
      const raw = this.buffer.subarray(0, total);
      this.buffer = this.buffer.subarray(total);
      if (this.untyped) {
        this.untyped = false;
        this.onMessage('', raw.subarray(4), raw);
      } else {
        this.onMessage(String.fromCharCode(raw[0] ?? 0), raw.subarray(5), raw);
      }
    }
  }
}

function cString(buffer: Buffer, start: number): { value: string; end: number } {
  const zero = buffer.indexOf(0, start);
  return { value: buffer.toString('utf8', start, zero), end: zero + 1 };
}

/** A Bind message's parameters: portal, statement, format codes, then each value with its length (-1: NULL). */
function bindParams(body: Buffer): (string | null)[] {
  let offset = cString(body, cString(body, 0).end).end;
  const formats = body.readInt16BE(offset);
  offset += 2 + 2 * formats;
  const count = body.readInt16BE(offset);
  offset += 2;
  const params: (string | null)[] = [];
  for (let i = 0; i < count; i++) {
    const length = body.readInt32BE(offset);
    offset += 4;
    if (length < 0) {
      params.push(null);
      continue;
    }
    params.push(body.toString('utf8', offset, offset + length));
    offset += length;
  }
  return params;
}
