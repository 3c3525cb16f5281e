import { type ChildProcess, spawn } from 'node:child_process';

/**
 * Stops a server started detached as the leader of its own process group (DynamoDB Local's JVM, PostgreSQL): asks the
 * whole group with `signal`, and kills it if it has not exited within `graceMs`. Resolves once it has exited.
 */
export async function stopProcessGroup(
  child: ChildProcess,
  exited: Promise<number | null>,
  { signal, graceMs }: { readonly signal: NodeJS.Signals; readonly graceMs: number },
): Promise<void> {
  const { pid } = child;
  if (pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  // The child was unref'd so it never holds its parent open; while we wait for it to die it must, or Node may
  // find its event loop empty mid-await and exit on the spot (with code 0, hiding a test run's failure).
  child.ref();
  try {
    process.kill(-pid, signal);
  } catch {
    return; // already gone
  }
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), graceMs);
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

/**
 * Exit handlers don't run when the parent is SIGKILLed (a crashed jest, a killed terminal). A tiny detached shell
 * watches the parent and, once it is gone, stops the server's process group (`signal`, then SIGKILL after
 * `graceSeconds`) and removes its working directory, so no server outlives its owner.
 */
export function reapWhenParentDies(
  groupId: number,
  workDir: string,
  { signal, graceSeconds }: { readonly signal: 'TERM' | 'INT'; readonly graceSeconds: number },
): void {
  const watcher = spawn(
    'sh',
    [
      '-c',
      `while kill -0 ${process.pid} 2>/dev/null && kill -0 ${groupId} 2>/dev/null; do sleep 1; done; kill -${signal} -${groupId} 2>/dev/null; sleep ${graceSeconds}; kill -KILL -${groupId} 2>/dev/null; rm -rf "$0"`,
      workDir,
    ],
    { detached: true, stdio: 'ignore' },
  );
  watcher.unref();
}
