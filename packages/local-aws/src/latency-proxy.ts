import { type AddressInfo, connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 that holds every chunk, in each direction, for `oneWayMs` before passing it on, in order:
 * a network between a function and its database (an RDS Proxy hop, another availability zone) on one machine. It
 * knows nothing of the protocol, so pipelined requests share one delay, as on a real link, where the fault proxy's
 * `delay-reply` holds each reply in turn.
 *
 * Node's timers fire no sooner than a millisecond, so under 1 ms each way the round trip's whole delay is held on the
 * way out (a request-and-reply protocol sees only the round trip); and a timer fires late on a busy machine: measure
 * the round trip it really adds (`SELECT 1` through it and around it) rather than assuming `2 * oneWayMs`.
 *
 * @example
 * const proxy = await startLatencyProxy(postgres.url, { oneWayMs: 2 });
 * const pool = new Pool({ connectionString: proxy.url });
 */
export interface LatencyProxy {
  /** The upstream URL with the proxy's address. */
  readonly url: string;
  readonly oneWayMs: number;
  close(): Promise<void>;
}

export async function startLatencyProxy(upstreamUrl: string, options: { oneWayMs: number }): Promise<LatencyProxy> {
  const { oneWayMs } = options;
  if (!(oneWayMs >= 0)) throw new Error(`oneWayMs must be 0 or more, got ${oneWayMs}`);
  const upstream = new URL(upstreamUrl);
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const target = connect(Number(upstream.port), upstream.hostname);
    target.setNoDelay(true);
    client.setNoDelay(true);
    sockets.add(client);
    sockets.add(target);
    const close = () => {
      client.destroy();
      target.destroy();
      sockets.delete(client);
      sockets.delete(target);
    };
    client.on('close', close).on('error', close);
    target.on('close', close).on('error', close);
    // Under a millisecond each way, the whole round trip is held on the way out: a timer can hold 1 ms, not 0.5.
    const [out, back] = oneWayMs < 1 ? [2 * oneWayMs, 0] : [oneWayMs, oneWayMs];
    client.on('data', delayed(target, out));
    target.on('data', delayed(client, back));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(upstreamUrl);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as AddressInfo).port);
  return {
    url: url.toString(),
    oneWayMs,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Writes each chunk to `to` once `ms` have passed since it arrived; chunks due together go out as one write. */
function delayed(to: Socket, ms: number): (chunk: Buffer) => void {
  const queue: { due: number; chunk: Buffer }[] = [];
  let timer: NodeJS.Timeout | undefined;
  const drain = () => {
    timer = undefined;
    const now = performance.now();
    const ready: Buffer[] = [];
    // A chunk due within the timer's own granularity goes now rather than a whole tick late.
    while (queue.length > 0 && (queue[0]?.due ?? 0) <= now + 0.25)
      ready.push((queue.shift() as { chunk: Buffer }).chunk);
    if (ready.length > 0 && !to.destroyed) to.write(ready.length === 1 ? (ready[0] as Buffer) : Buffer.concat(ready));
    schedule();
  };
  const schedule = () => {
    const head = queue[0];
    if (timer || !head) return;
    timer = setTimeout(drain, Math.max(0, head.due - performance.now()));
    timer.unref();
  };
  return (chunk) => {
    if (ms === 0) {
      to.write(chunk);
      return;
    }
    queue.push({ due: performance.now() + ms, chunk });
    schedule();
  };
}
