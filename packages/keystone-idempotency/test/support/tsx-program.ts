import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { join } from 'node:path';

const repository = join(__dirname, '..', '..', '..', '..');

/** A program running in a Node process of its own. */
export interface TsxProgram {
  readonly child: ChildProcessWithoutNullStreams;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Everything it wrote to stderr so far. */
  stderr(): string;
}

/**
 * Runs TypeScript source as an ES module in a fresh Node process through tsx, as a team runs its code locally: it
 * imports the package by name (`keystone-idempotency/postgres`), resolved to its sources, and `pg` from the
 * repository. `env` is added to this process's environment.
 */
export function runTsx(program: string, env: Readonly<Record<string, string>> = {}): TsxProgram {
  const tsx = join(repository, 'node_modules', 'tsx', 'dist', 'cli.mjs');
  const child = spawn(process.execPath, [tsx, '--conditions=keystone-source', '--input-type=module', '-e', program], {
    cwd: repository,
    env: { ...process.env, ...env },
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited, stderr: () => stderr };
}
