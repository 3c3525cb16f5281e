import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = join(__dirname, '..', '..');

export interface SynthesizedAssembly {
  /** The cloud assembly directory (`cdk.out` as `cdk synth -o` writes it): templates, asset manifests, bundles. */
  readonly directory: string;
  readonly durationMs: number;
  /** What the CLI printed (stdout and stderr): a warning would be in it. */
  readonly output: string;
  dispose(): void;
}

/**
 * Runs the CDK CLI's `cdk synth -c env=<environment>` exactly as `npm run synth` does (offline, deprecated APIs
 * fatal), into a new temporary directory: the app, cdk-nag and the esbuild bundling of every function. The result is
 * the cloud assembly `cdk deploy` would upload, bundles included. `context` adds `-c name=value` pairs (`store`).
 */
export async function synthesize(
  environment: string,
  { timeoutMs = 240_000, context = {} }: { timeoutMs?: number; context?: Readonly<Record<string, string>> } = {},
): Promise<SynthesizedAssembly> {
  const directory = mkdtempSync(join(tmpdir(), `keystone-cdk-out-${environment}-`));
  const startedAt = Date.now();
  const child = spawn(
    process.execPath,
    [
      join(root, 'node_modules', 'aws-cdk', 'bin', 'cdk'),
      'synth',
      '-c',
      `env=${environment}`,
      ...Object.entries(context).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
      '--quiet',
      '--no-notices',
      '--output',
      directory,
    ],
    {
      cwd: root,
      env: { ...process.env, JSII_DEPRECATED: 'fail', CDK_DISABLE_VERSION_CHECK: '1', CDK_DISABLE_CLI_TELEMETRY: '1' },
      // Its own process group, so a timeout ends the app and esbuild the CLI started, not just the CLI.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  const outcome = await Promise.race([exited, timedOut]);
  clearTimeout(timer);
  const dispose = () => rmSync(directory, { recursive: true, force: true });
  if (outcome !== 0) {
    if (outcome === 'timeout' && child.pid !== undefined) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      await exited;
    }
    dispose();
    const reason = outcome === 'timeout' ? `did not finish within ${timeoutMs} ms` : `exited with ${outcome}`;
    throw new Error(`cdk synth -c env=${environment} ${reason}:\n${output}`);
  }
  return { directory, durationMs: Date.now() - startedAt, output, dispose };
}
