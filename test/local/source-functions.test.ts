import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { invokeLambda } from '@keystone-idempotency/local-aws/lambda-invoke';
import {
  SOURCE_BUNDLING,
  SOURCE_NODE_OPTIONS,
  type SourceFunctions,
  SourceInitError,
  startSourceFunctions,
} from '@keystone-idempotency/local-aws/source-functions';
import { IDEMPOTENCY_DISABLED_ENV } from 'keystone-idempotency/engine';
import { eventually } from '../support/eventually';
import { postgresUrl, testPostgres } from '../support/postgres';

/**
 * Functions run from their TypeScript sources, bundled with esbuild as the deployment bundles them and run in
 * execution environments as the deployed bundles are (packages/local-aws/src/bundled-function.ts): what they read from
 * `process.env` is the environment they were given under Lambda's own variables, errors come back as Lambda reports
 * them with stack traces in the TypeScript sources, a crash ends only its environment, an entry that can't load
 * stops the start, and an invocation past its timeout is stopped, with what it held.
 */
jest.setTimeout(60_000);

const directory = mkdtempSync(join(tmpdir(), 'keystone-source-functions-'));
const running: SourceFunctions[] = [];
afterAll(async () => {
  await Promise.all(running.map((fns) => fns.stop()));
  rmSync(directory, { recursive: true, force: true });
});

/** Writes a TypeScript entry file; its module scope runs at init, as a function's does at cold start. */
function entry(name: string, source: string): string {
  const file = join(directory, `${name}.ts`);
  writeFileSync(file, source);
  return file;
}

/** An import of one of this repository's modules by absolute path (the entries live outside it). */
const from = (path: string) => JSON.stringify(join(__dirname, '..', '..', path));

const configured = entry(
  'configured',
  `const table: string = process.env.TABLE ?? 'unset';
   export const handler = async (event: { n: number }, context: { functionName: string }) =>
     ({ table, n: event.n * 2, name: context.functionName, at: new Date(0) });`,
);
const failing = entry(
  'failing',
  `class PaymentDeclined extends Error { constructor() { super('card declined'); this.name = 'PaymentDeclined'; } }
   export const handler = async () => { throw new PaymentDeclined(); };`,
);
const crashing = entry(
  'crashing',
  `export const handler = async (event: { crash: boolean }) => {
     if (event.crash) setTimeout(() => { throw new Error('uncaught, outside the invocation'); });
     return new Promise((resolve) => setTimeout(() => resolve({ pid: process.pid }), event.crash ? 60_000 : 0));
   };`,
);
const lambdaVariables = entry(
  'lambda-variables',
  `import { idempotencyDisabled } from ${from('packages/keystone-idempotency/src/engine/switch')};
   export const handler = async (event: { checkSwitch: boolean }) => {
     if (event.checkSwitch) idempotencyDisabled();
     const { AWS_LAMBDA_FUNCTION_NAME, AWS_LAMBDA_FUNCTION_MEMORY_SIZE, AWS_REGION, AWS_ACCESS_KEY_ID, TABLE, HOME } =
       process.env;
     return { AWS_LAMBDA_FUNCTION_NAME, AWS_LAMBDA_FUNCTION_MEMORY_SIZE, AWS_REGION, AWS_ACCESS_KEY_ID, TABLE, HOME };
   };`,
);

async function start(
  functions: { name: string; entry: string; memoryMb?: number }[],
  environment: Record<string, string> = {},
) {
  const fns = await startSourceFunctions({ functions, environment, output: () => undefined });
  running.push(fns);
  return fns;
}

function invoke(fns: SourceFunctions, name: string, event: unknown, timeoutMs = 30_000) {
  return invokeLambda(fns.handlers.get(name)!, event, { functionName: name, timeoutMs }).outcome;
}

describe('startSourceFunctions', () => {
  it('runs a function under the variables Lambda sets, so the engine refuses the off switch as deployed', async () => {
    const fns = await start([{ name: 'keystone-variables', entry: lambdaVariables, memoryMb: 512 }], {
      TABLE: 'table-a',
      [IDEMPOTENCY_DISABLED_ENV]: 'true',
    });
    expect(await invoke(fns, 'keystone-variables', { checkSwitch: false })).toEqual({
      kind: 'returned',
      value: {
        AWS_LAMBDA_FUNCTION_NAME: 'keystone-variables',
        AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '512',
        AWS_REGION: 'local',
        AWS_ACCESS_KEY_ID: 'local',
        TABLE: 'table-a',
        // Nothing of this process's environment.
      },
    });
    expect(await invoke(fns, 'keystone-variables', { checkSwitch: true })).toMatchObject({
      kind: 'threw',
      error: {
        name: 'ConfigurationError',
        message: expect.stringContaining('is refused in a Lambda function (keystone-variables)'),
      },
    });
  });

  it("gives each function its own process.env, and leaves this process's alone", async () => {
    const [a, b] = await Promise.all([
      start([{ name: 'configured', entry: configured }], { TABLE: 'table-a' }),
      start([{ name: 'configured', entry: configured }], { TABLE: 'table-b' }),
    ]);
    expect(await invoke(a, 'configured', { n: 21 })).toEqual({
      kind: 'returned',
      // The result crosses as JSON, as Lambda returns it: a Date becomes its string.
      value: { table: 'table-a', n: 42, name: 'configured', at: '1970-01-01T00:00:00.000Z' },
    });
    expect(await invoke(b, 'configured', { n: 1 })).toMatchObject({ kind: 'returned', value: { table: 'table-b' } });
    expect(process.env.TABLE).toBeUndefined();
  });

  it("reports a handler's error by its name and message, its stack in the TypeScript source", async () => {
    const fns = await start([{ name: 'failing', entry: failing }]);
    const outcome = await invoke(fns, 'failing', {});
    expect(outcome).toMatchObject({ kind: 'threw', error: { name: 'PaymentDeclined', message: 'card declined' } });
    // Minified as deployed, and mapped back by --enable-source-maps: the file and line of the throw.
    expect((outcome as { error: Error }).error.stack).toContain(`${failing}:2:`);
  });

  it('fails the invocation of an environment that crashed, and starts a new one for the next', async () => {
    const fns = await start([{ name: 'crashing', entry: crashing }]);
    const [first] = fns.functions.get('crashing')!.environmentPids();
    expect(await invoke(fns, 'crashing', { crash: true })).toMatchObject({
      kind: 'threw',
      error: { name: 'Runtime.ExitError' },
    });
    const next = await invoke(fns, 'crashing', { crash: false });
    expect(next).toMatchObject({ kind: 'returned', value: { pid: expect.any(Number) } });
    expect((next as { value: { pid: number } }).value.pid).not.toBe(first);
  });

  it('refuses to start when an entry cannot load, naming each function that failed and why', async () => {
    const noHandler = entry('no-handler', 'export const notTheHandler = async () => 1;');
    const throwsAtInit = entry('throws-at-init', "throw new Error('environment variable TABLE is required');");
    const started = start([
      { name: 'configured', entry: configured },
      { name: 'no-handler', entry: noHandler },
      { name: 'throws-at-init', entry: throwsAtInit },
    ]);
    await expect(started).rejects.toBeInstanceOf(SourceInitError);
    await expect(started).rejects.toThrow(
      /- no-handler: Runtime\.HandlerNotFound: index\.handler is undefined or not exported\n {2}- throws-at-init: Error: environment variable TABLE is required$/,
    );
  });

  it('removes the bundles a killed run left behind, and its own when stopped', async () => {
    const gone = spawnSync(process.execPath, ['-e', '0']).pid;
    const orphaned = join(tmpdir(), `keystone-sources-${gone}-killed`);
    mkdirSync(join(orphaned, 'configured'), { recursive: true });
    const ours = () => readdirSync(tmpdir()).filter((name) => name.startsWith(`keystone-sources-${process.pid}-`));
    const before = ours();
    const fns = await startSourceFunctions({ functions: [{ name: 'configured', entry: configured }], environment: {} });
    expect(existsSync(orphaned)).toBe(false);
    expect(ours()).toHaveLength(before.length + 1);
    await fns.stop();
    expect(ours()).toEqual(before);
  });

  it('refuses to start when the sources cannot be bundled, naming the import that resolves nowhere', async () => {
    const broken = entry(
      'broken',
      "import { nothing } from './not-there';\nexport const handler = async () => nothing;",
    );
    const started = start([{ name: 'broken', entry: broken }]);
    await expect(started).rejects.toBeInstanceOf(SourceInitError);
    await expect(started).rejects.toThrow(
      /- esbuild: Runtime\.BundleError: .*broken\.ts:1: Could not resolve "\.\/not-there"/,
    );
  });
});

describe('an invocation past its timeout', () => {
  const pg = testPostgres();
  /** Locks a row in a transaction of its own, then never answers, or answers at once, when the lock is free. */
  const locking = entry(
    'locking',
    `import pg from ${JSON.stringify(require.resolve('pg'))};
     export const handler = async (event: { table: string; pk: string; applicationName: string; stall: boolean }) => {
       const client = new pg.Client({ connectionString: process.env.DATABASE_URL, application_name: event.applicationName });
       await client.connect();
       await client.query('BEGIN');
       await client.query(\`SELECT * FROM \${event.table} WHERE pk = $1 FOR UPDATE NOWAIT\`, [event.pk]);
       if (event.stall) await new Promise(() => undefined);
       await client.query('COMMIT');
       await client.end();
       return 'locked';
     };`,
  );

  it('is stopped at its timeout: its environment is killed, its session and lock freed, the next one answered', async () => {
    const fns = await start([{ name: 'locking', entry: locking }], { DATABASE_URL: postgresUrl() });
    const pk = `stalled-${randomUUID()}`;
    await pg.pool.query(`INSERT INTO ${pg.effectsTable} (pk, sk) VALUES ($1, 'row')`, [pk]);
    const event = { table: pg.effectsTable, pk, applicationName: `keystone-stall-${randomUUID().slice(0, 8)}` };
    const sessions = async () =>
      (
        await pg.pool.query<{ state: string }>('SELECT state FROM pg_stat_activity WHERE application_name = $1', [
          event.applicationName,
        ])
      ).rows;
    const [stalledPid] = fns.functions.get('locking')!.environmentPids();

    const stalled = invokeLambda(
      fns.handlers.get('locking')!,
      { ...event, stall: true },
      {
        functionName: 'locking',
        timeoutMs: 1_500,
      },
    );
    // While it runs, it holds a session in a transaction, and the row's lock.
    await eventually(sessions, (rows) => rows.length === 1 && rows[0]!.state === 'idle in transaction');
    expect(await stalled.outcome).toEqual({ kind: 'timed-out', timeoutMs: 1_500 });

    // The environment is killed (as Lambda ends it), and with it its connection: the server ends the session.
    await eventually(
      () => fns.functions.get('locking')!.environmentPids(),
      (pids) => !pids.includes(stalledPid!),
    );
    expect(() => process.kill(stalledPid!, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
    await eventually(sessions, (rows) => rows.length === 0);
    // The next invocation gets a new environment, and the row (NOWAIT: a held lock would fail it at once).
    expect(await invoke(fns, 'locking', { ...event, stall: false })).toEqual({ kind: 'returned', value: 'locked' });
  });
});

describe('the bundling options', () => {
  it("are the deployment's (lib/infra/service-function.ts), in esbuild's terms", async () => {
    const { LAMBDA_BUNDLING, LAMBDA_NODE_OPTIONS, LAMBDA_RUNTIME } = await import('../../lib/infra/service-function');
    expect({
      format: LAMBDA_BUNDLING.format,
      mainFields: LAMBDA_BUNDLING.mainFields,
      banner: LAMBDA_BUNDLING.banner,
      minify: LAMBDA_BUNDLING.minify,
      sourcemap: LAMBDA_BUNDLING.sourceMap,
      sourcesContent: LAMBDA_BUNDLING.sourcesContent ?? true,
      // The SDK is bundled: nothing is left external.
      externals: LAMBDA_BUNDLING.bundleAwsSDK ? [] : ['@aws-sdk/*'],
      target: LAMBDA_RUNTIME.name.replace('nodejs', 'node').replace('.x', ''),
    }).toEqual({
      format: SOURCE_BUNDLING.format,
      mainFields: SOURCE_BUNDLING.mainFields,
      banner: SOURCE_BUNDLING.banner.js,
      minify: SOURCE_BUNDLING.minify,
      sourcemap: SOURCE_BUNDLING.sourcemap,
      sourcesContent: SOURCE_BUNDLING.sourcesContent,
      externals: [],
      target: SOURCE_BUNDLING.target,
    });
    expect(SOURCE_NODE_OPTIONS).toEqual(LAMBDA_NODE_OPTIONS);
  });
});
