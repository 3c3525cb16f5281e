import { AsyncLocalStorage } from 'node:async_hooks';
import { Socket } from 'node:net';
import type { Pool, PoolClient } from 'pg';

/**
 * Round trips to PostgreSQL as the client lives them (the stores' tests count
 * with it too, through their test support's `testPostgres`): one starts whenever the client writes after it last read, or for the first time. Writes made back to back before any reply
 * could be read (a pipelined BEGIN, statements and COMMIT) are one round trip; a write that had to wait for a reply
 * starts another. Counted on the client's own sockets, whatever the kernel does with the bytes.
 */
export class RoundTrips {
  #count = 0;

  get count(): number {
    return this.#count;
  }

  reset(): void {
    this.#count = 0;
  }

  /** A socket factory for pg's `stream` option that counts on every connection it makes. */
  socket(): () => Socket {
    return () => {
      const socket = new Socket();
      let replied = true;
      // Installed once connected: connecting resets a socket's own `write` to the prototype's.
      socket.once('connect', () => {
        const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
        socket.write = ((...args: unknown[]) => {
          if (replied) this.#count += 1;
          replied = false;
          return write(...args);
        }) as Socket['write'];
      });
      socket.on('data', () => {
        replied = true;
      });
      return socket;
    };
  }
}

/** What a pool's connections did while the tracker watched. */
export interface ConnectionUse {
  /** Most connections checked out of the pool at once. */
  readonly peakHeld: number;
  /** Connections checked out on average over the watch (time-weighted): connection-milliseconds per millisecond. */
  readonly meanHeld: number;
  /** Most callers waiting for a connection at once (sampled every few ms). */
  readonly peakWaiting: number;
  /** Connections open at the end (held or idle). */
  readonly open: number;
}

/**
 * Who holds a pool's connections. `pool.connect` is wrapped (both its promise and its callback form), so every
 * checkout is counted, in all and for the call it was made in (an `AsyncLocalStorage` context that {@link within}
 * opens): `heldByThisCall()`, asked during a call's outside effect, says how many connections that very call holds
 * across it, even with fifty calls running at once.
 */
export class ConnectionTracker {
  #held = 0;
  #peakHeld = 0;
  #peakWaiting = 0;
  #sampler: NodeJS.Timeout | undefined;
  /** Connection-milliseconds held since the watch started, up to `#changed`. */
  #area = 0;
  #changed = performance.now();
  #started = performance.now();
  readonly #calls = new AsyncLocalStorage<{ held: number }>();

  constructor(private readonly pool: Pool) {
    const connect = pool.connect.bind(pool) as (callback?: ConnectCallback) => Promise<PoolClient> | undefined;
    const tracked = (client: PoolClient) => {
      const call = this.#calls.getStore();
      this.#account();
      this.#held += 1;
      this.#peakHeld = Math.max(this.#peakHeld, this.#held);
      if (call) call.held += 1;
      const release = client.release.bind(client);
      let released = false;
      client.release = (error?: Error | boolean) => {
        if (!released) {
          released = true;
          this.#account();
          this.#held -= 1;
          if (call) call.held -= 1;
        }
        client.release = release;
        return release(error);
      };
      return client;
    };
    (pool as { connect: unknown }).connect = (callback?: ConnectCallback) => {
      if (typeof callback === 'function') {
        const call = this.#calls.getStore();
        return connect((error, client, done) => {
          if (error || !client) return callback(error, client, done);
          const run = () => {
            tracked(client);
            callback(undefined, client, (release?: unknown) => client.release(release as Error | boolean | undefined));
          };
          return call ? this.#calls.run(call, run) : run();
        });
      }
      return (connect() as Promise<PoolClient>).then(tracked);
    };
  }

  /** Runs one call in a context of its own, so that its connections are told from other calls'. */
  within<T>(call: () => Promise<T>): Promise<T> {
    return this.#calls.run({ held: 0 }, call);
  }

  /** Connections the current call holds now (0 outside any call). */
  heldByThisCall(): number {
    return this.#calls.getStore()?.held ?? 0;
  }

  /** Starts a new watch: peaks and the mean from now on, `waitingCount` sampled every 2 ms until {@link stop}. */
  start(): void {
    this.#area = 0;
    this.#started = this.#changed = performance.now();
    this.#peakHeld = this.#held;
    this.#peakWaiting = this.pool.waitingCount;
    clearInterval(this.#sampler);
    this.#sampler = setInterval(() => {
      this.#peakWaiting = Math.max(this.#peakWaiting, this.pool.waitingCount);
    }, 2);
  }

  stop(): ConnectionUse {
    clearInterval(this.#sampler);
    this.#sampler = undefined;
    this.#account();
    const elapsed = this.#changed - this.#started;
    return {
      peakHeld: this.#peakHeld,
      meanHeld: elapsed > 0 ? this.#area / elapsed : 0,
      peakWaiting: this.#peakWaiting,
      open: this.pool.totalCount,
    };
  }

  /** Adds the connections held since the last change to the area, before the count changes. */
  #account(): void {
    const at = performance.now();
    this.#area += this.#held * (at - this.#changed);
    this.#changed = at;
  }
}

type ConnectCallback = (
  error: Error | undefined,
  client: PoolClient | undefined,
  done: (release?: unknown) => void,
) => void;
