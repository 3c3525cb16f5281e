import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from '@keystone-idempotency/local-aws/free-port';

export interface StackProcess {
  /** The REST API's URL. */
  readonly url: string;
  /** The HTTP API's URL (payload 2.0), as the banner's `http api` line prints it. */
  readonly httpApiUrl: string;
  /** The stack process's id: its function environments, emulators and DynamoDB Local are its descendants. */
  readonly pid: number;
  readonly output: () => string;
  /** SIGKILL: the process dies mid-request, no cleanup, as a Lambda container does on a crash. */
  crash(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Runs `bin/local.ts` (what `npm start` runs) as a child process, in its own process group, against the given
 * environment, and waits until it serves. The ports are chosen once and reused, so a restarted API has the same URL;
 * without an HTTP API port the stack picks a free one, read from its banner.
 */
export async function startStackProcess(
  env: Record<string, string>,
  port?: number,
  httpApiPort?: number,
): Promise<StackProcess> {
  if (port !== undefined) return startOn(env, port, httpApiPort);
  // A port chosen here can be taken by another process in the second the stack takes to start: try a new one.
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await startOn(env, await freePort(), httpApiPort);
    } catch (error) {
      if (attempt === 3 || !portTaken(error)) throw error;
    }
  }
}

/** Whether a stack failed to start because a port it was given was taken by then (lib/local/ports.ts's message). */
export function portTaken(error: unknown): boolean {
  return error instanceof Error && error.message.includes('is already in use');
}

async function startOn(env: Record<string, string>, apiPort: number, httpApiPort?: number): Promise<StackProcess> {
  const child = spawnStack({ ...env, PORT: String(apiPort), HTTP_API_PORT: String(httpApiPort ?? 0) });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await waitFor(
      () => output.includes('API listening on') && HTTP_API_LINE.test(output),
      // Each function's first environment compiles its sources at start: generous, for a loaded machine.
      60_000,
      () => output,
      exited,
    );
  } catch (error) {
    // A stack that did not come up in time is still starting: nobody holds it to stop it later, and its process
    // group (and the pipes this process reads it by) would outlive the test file and keep jest's worker from exiting.
    await killGroup(child, 'SIGKILL', exited);
    throw error;
  }
  return {
    url: `http://127.0.0.1:${apiPort}`,
    httpApiUrl: HTTP_API_LINE.exec(output)?.[1] as string,
    pid: child.pid!,
    output: () => output,
    crash: () => killGroup(child, 'SIGKILL', exited),
    stop: () => killGroup(child, 'SIGTERM', exited),
  };
}

/** The banner's line for the HTTP API: `  http api           http://127.0.0.1:<port>  (...)`. */
const HTTP_API_LINE = /^ {2}http api +(http:\/\/127\.0\.0\.1:\d+) /m;

/** Runs `bin/local.ts` expecting it to fail at start: resolves with its exit code and output once it exits. */
export async function runStackProcessToExit(
  env: Record<string, string>,
  timeoutMs = 30_000,
): Promise<{ code: number | null; output: string }> {
  const child = spawnStack(env);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  const outcome = await Promise.race([exited, timeout]);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    await killGroup(
      child,
      'SIGKILL',
      exited.then(() => undefined),
    );
    throw new Error(`the local stack was still running after ${timeoutMs} ms:\n${output}`);
  }
  return { code: outcome, output };
}

function spawnStack(env: Record<string, string>): ChildProcess {
  const root = join(__dirname, '..', '..');
  return spawn(
    process.execPath,
    [
      join(root, 'node_modules', 'tsx', 'dist', 'cli.mjs'),
      '--conditions=keystone-source',
      join(root, 'bin', 'local.ts'),
    ],
    {
      cwd: root,
      env: { ...process.env, ...env },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
}

async function killGroup(child: ChildProcess, signal: NodeJS.Signals, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    return;
  }
  await exited;
}

async function waitFor(done: () => boolean, timeoutMs: number, output: () => string, exited: Promise<void>) {
  let hasExited = false;
  void exited.then(() => {
    hasExited = true;
  });
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (hasExited) throw new Error(`the local stack exited:\n${output()}`);
    if (Date.now() > deadline) throw new Error(`the local stack did not start:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
