import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port';
import { stopProcessGroup } from './process-group';

/** A running redis-server: where it listens, and how to restart or stop it. */
export interface RedisLocal {
  /** `redis://127.0.0.1:PORT`: loopback only, no password. */
  readonly url: string;
  readonly port: number;
  /** The server's working directory (its append-only file, with `appendOnly`); removed by `stop()`. */
  readonly workDir: string;
  /**
   * Stops the server and starts it again on the same port and directory: `SIGKILL` as a crash does (the default), or
   * `SIGTERM` as a shutdown. What survives is what its persistence kept: every acknowledged write with `appendOnly`
   * and `appendfsync always` (each fsynced before its reply), nothing without an append-only file.
   */
  restart(options?: { signal?: 'SIGKILL' | 'SIGTERM' }): Promise<void>;
  stop(): Promise<void>;
}

export interface RedisLocalOptions {
  readonly port?: number;
  /** The server binary. Default `redis-server` on the PATH (Debian's `redis-server` package). */
  readonly binary?: string;
  /**
   * Keep every write in an append-only file, fsynced before each reply (`appendfsync always`, unless `settings` says
   * otherwise), so that a restart loses nothing acknowledged: what the Redis store requires by default. Default true.
   */
  readonly appendOnly?: boolean;
  /**
   * Where the server's temporary directory is made. Default `/dev/shm` where there is one (a tmpfs: an fsync there
   * costs nothing, so `appendfsync always` keeps a test's speed, and the file still outlives the process), else the
   * system's temporary directory. Pass `os.tmpdir()` to fsync to a disk.
   */
  readonly parentDir?: string;
  /**
   * More `--name value` settings (`maxmemory-policy`, `appendfsync`, `rename-command`, `replicaof`). Default
   * `maxmemory-policy noeviction`, `appendfsync always`.
   */
  readonly settings?: Readonly<Record<string, string | readonly string[]>>;
  readonly readyTimeoutMs?: number;
}

/**
 * Starts a throwaway redis-server on a free loopback port, in a process group of its own, with no RDB snapshots and
 * an append-only file fsynced on every write (unless `appendOnly: false`): nothing is written outside its temporary
 * directory, which `stop()` removes. As with the other local servers, a detached watcher stops it if this process dies
 * without `stop()`.
 */
export async function startRedisLocal(options: RedisLocalOptions = {}): Promise<RedisLocal> {
  const port = options.port ?? (await freePort());
  const parentDir = options.parentDir ?? (existsSync('/dev/shm') ? '/dev/shm' : tmpdir());
  const workDir = mkdtempSync(join(parentDir, 'redis-local-'));
  const settings: Record<string, string | readonly string[]> = {
    'maxmemory-policy': 'noeviction',
    appendfsync: 'always',
    ...options.settings,
    port: String(port),
    bind: '127.0.0.1',
    'protected-mode': 'yes',
    dir: workDir,
    save: '',
    appendonly: options.appendOnly === false ? 'no' : 'yes',
    daemonize: 'no',
    logfile: '',
  };
  const args = Object.entries(settings).flatMap(([name, value]) =>
    typeof value === 'string' ? [`--${name}`, value] : [`--${name}`, ...value],
  );
  const binary = options.binary ?? 'redis-server';
  let server = await launch(binary, args, port, options.readyTimeoutMs ?? 10_000, workDir);
  reapWhenParentDies(workDir);
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    workDir,
    async restart({ signal = 'SIGKILL' } = {}) {
      await stopProcessGroup(server.child, server.exited, { signal, graceMs: 5000 });
      server = await launch(binary, args, port, options.readyTimeoutMs ?? 10_000, workDir);
    },
    async stop() {
      await stopProcessGroup(server.child, server.exited, { signal: 'SIGTERM', graceMs: 5000 });
      rmSync(workDir, { recursive: true, force: true });
    },
  };
}

interface Launched {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
}

async function launch(
  binary: string,
  args: string[],
  port: number,
  timeoutMs: number,
  workDir: string,
): Promise<Launched> {
  const child = spawn(binary, args, { cwd: workDir, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const failed = new Promise<Error>((resolve) => child.once('error', resolve));
  if (child.pid === undefined) throw new Error(`could not start ${binary}: ${(await failed).message}`);
  child.unref();
  (child.stdout as { unref?: () => void } | null)?.unref?.();
  (child.stderr as { unref?: () => void } | null)?.unref?.();
  writeFileSync(join(workDir, 'server.pid'), String(child.pid));
  const launched = { child, exited };
  try {
    await waitForPong(port, timeoutMs, exited);
  } catch (error) {
    await stopProcessGroup(child, exited, { signal: 'SIGKILL', graceMs: 1000 });
    throw new Error(`redis-server did not start on port ${port}: ${(error as Error).message}\n${output}`);
  }
  return launched;
}

/** PING, in RESP, until the server answers PONG (it answers LOADING while it reads its append-only file). */
async function waitForPong(port: number, timeoutMs: number, exited: Promise<number | null>): Promise<void> {
  let hasExited = false;
  void exited.then(() => {
    hasExited = true;
  });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (hasExited) throw new Error('the server exited');
    if (await pong(port)) return;
    if (Date.now() > deadline) throw new Error(`no PONG within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function pong(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let reply = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('*1\r\n$4\r\nPING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
  });
}

/**
 * Exit handlers don't run when this process is SIGKILLed: a detached shell watches it and, once it is gone, kills the
 * server whose process group `server.pid` names (the current one, across restarts) and removes the directory. It ends
 * on its own once `stop()` has removed the directory.
 */
function reapWhenParentDies(workDir: string): void {
  const watcher = spawn(
    'sh',
    [
      '-c',
      `while kill -0 ${process.pid} 2>/dev/null && [ -d "$0" ]; do sleep 1; done; [ -d "$0" ] && kill -KILL -"$(cat "$0/server.pid")" 2>/dev/null; rm -rf "$0"`,
      workDir,
    ],
    { detached: true, stdio: 'ignore' },
  );
  watcher.unref();
}

/** A Redis Cluster of throwaway servers: every master, each serving an equal range of the hash slots. */
export interface RedisLocalCluster {
  /** The masters in slot order: node i of n serves slots from i * 16384 / n up to (i + 1) * 16384 / n. */
  readonly nodes: readonly RedisLocal[];
  stop(): Promise<void>;
}

/**
 * Starts `masters` servers (default 3) with `cluster-enabled yes`, gives each its range of slots and introduces them
 * to one another, and answers once every node reports `cluster_state:ok`: a cluster without replicas, as
 * `redis-cli --cluster create` would make, in about a second.
 */
export async function startRedisCluster(
  options: Omit<RedisLocalOptions, 'port'> & { readonly masters?: number } = {},
): Promise<RedisLocalCluster> {
  const count = options.masters ?? 3;
  const settings = { ...options.settings, 'cluster-enabled': 'yes', 'cluster-config-file': 'nodes.conf' };
  const nodes = await Promise.all(Array.from({ length: count }, () => startRedisLocal({ ...options, settings })));
  const stop = async () => {
    await Promise.all(nodes.map((node) => node.stop()));
  };
  try {
    for (const [i, node] of nodes.entries()) {
      const from = Math.floor((i * 16384) / count);
      const to = Math.floor(((i + 1) * 16384) / count) - 1;
      await command(node.port, ['CLUSTER', 'ADDSLOTSRANGE', String(from), String(to)]);
    }
    const [first] = nodes;
    for (const node of nodes.slice(1)) await command(first!.port, ['CLUSTER', 'MEET', '127.0.0.1', String(node.port)]);
    const deadline = Date.now() + (options.readyTimeoutMs ?? 15_000);
    for (const node of nodes) {
      for (;;) {
        const info = await command(node.port, ['CLUSTER', 'INFO']);
        if (info.includes('cluster_state:ok') && info.includes(`cluster_known_nodes:${count}`)) break;
        if (Date.now() > deadline) throw new Error(`the cluster did not form: ${info}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { nodes, stop };
}

/** One command in RESP, and its reply (a status, an integer or a bulk string) as text; an error reply rejects. */
function command(port: number, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let reply = Buffer.alloc(0);
    const done = (error: Error | undefined, text?: string) => {
      socket.destroy();
      if (error) reject(error);
      else resolve(text ?? '');
    };
    socket.setTimeout(5000, () => done(new Error(`no reply to ${args.join(' ')}`)));
    socket.on('error', (error) => done(error));
    socket.on('connect', () =>
      socket.write(`*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join('')}`),
    );
    socket.on('data', (chunk: Buffer) => {
      reply = Buffer.concat([reply, chunk]);
      const line = reply.indexOf('\r\n');
      if (line < 0) return;
      const head = reply.toString('utf8', 1, line);
      const type = String.fromCharCode(reply[0] ?? 0);
      if (type === '-') return done(new Error(`${args.join(' ')}: ${head}`));
      if (type !== '$') return done(undefined, head);
      const length = Number(head);
      if (length < 0) return done(undefined, '');
      if (reply.length >= line + 2 + length + 2) done(undefined, reply.toString('utf8', line + 2, line + 2 + length));
    });
  });
}
