import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IDEMPOTENCY_DISABLED_ENV } from '../../lib/engine/switch';
import { lambdaServiceVariables } from '../../lib/local/bundled-function';
import { invokeLambda } from '../../lib/local/lambda-invoke';
import { type SourceFunctions, SourceInitError, startSourceFunctions } from '../../lib/local/source-functions';
import { recordingLog } from './support';

/**
 * Functions run from their TypeScript sources in a worker of their own (lib/local/source-runtime.mjs): what they
 * read from `process.env` is the environment they were given, errors come back as Lambda reports them, a crash ends
 * only the runtime (the next invocation starts a new one), and an entry that can't load stops the start.
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
     return new Promise((resolve) => setTimeout(() => resolve('finished'), event.crash ? 60_000 : 0));
   };`,
);

const lambdaVariables = entry(
  'lambda-variables',
  `import { idempotencyDisabled } from ${JSON.stringify(join(__dirname, '..', '..', 'lib', 'engine', 'switch'))};
   export const handler = async (event: { checkSwitch: boolean }) => {
     if (event.checkSwitch) idempotencyDisabled();
     const { AWS_LAMBDA_FUNCTION_NAME, AWS_LAMBDA_FUNCTION_MEMORY_SIZE, AWS_REGION, AWS_ACCESS_KEY_ID, TABLE } = process.env;
     return { AWS_LAMBDA_FUNCTION_NAME, AWS_LAMBDA_FUNCTION_MEMORY_SIZE, AWS_REGION, AWS_ACCESS_KEY_ID, TABLE };
   };`,
);

const log = recordingLog();

async function start(functions: { name: string; entry: string }[], environment: Record<string, string> = {}) {
  const fns = await startSourceFunctions({ functions, environment, log });
  running.push(fns);
  return fns;
}

function invoke(fns: SourceFunctions, name: string, event: unknown) {
  return invokeLambda(fns.handlers.get(name)!, event, { functionName: name, timeoutMs: 30_000 }).outcome;
}

describe('startSourceFunctions', () => {
  it('runs a function under the variables Lambda sets, so the engine refuses the off switch as deployed', async () => {
    const lambda = lambdaServiceVariables({
      functionName: 'keystone-variables',
      handler: 'index.handler',
      runtime: 'nodejs22.x',
      memoryMb: 512,
      taskRoot: directory,
    });
    const fns = await start([{ name: 'lambda-variables', entry: lambdaVariables }], {
      TABLE: 'table-a',
      [IDEMPOTENCY_DISABLED_ENV]: 'true',
      ...lambda,
    });
    expect(await invoke(fns, 'lambda-variables', { checkSwitch: false })).toEqual({
      kind: 'returned',
      value: {
        AWS_LAMBDA_FUNCTION_NAME: 'keystone-variables',
        AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '512',
        AWS_REGION: 'local',
        AWS_ACCESS_KEY_ID: 'local',
        TABLE: 'table-a',
      },
    });
    expect(await invoke(fns, 'lambda-variables', { checkSwitch: true })).toMatchObject({
      kind: 'threw',
      error: {
        name: 'ConfigurationError',
        message: expect.stringContaining('is refused in a Lambda function (keystone-variables)'),
      },
    });
  });

  it("gives each runtime its own process.env, and leaves this process's alone", async () => {
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

  it("reports a handler's error by its name and message, as Lambda does", async () => {
    const fns = await start([{ name: 'failing', entry: failing }]);
    const outcome = await invoke(fns, 'failing', {});
    expect(outcome).toMatchObject({ kind: 'threw', error: { name: 'PaymentDeclined', message: 'card declined' } });
  });

  it('fails the invocations of a runtime that crashed, and starts a new one for the next', async () => {
    const fns = await start([{ name: 'crashing', entry: crashing }]);
    expect(await invoke(fns, 'crashing', { crash: true })).toMatchObject({
      kind: 'threw',
      error: { name: 'Runtime.ExitError' },
    });
    expect(log.errors).toEqual([
      {
        message: 'the runtime of the functions run from source crashed',
        details: { error: expect.objectContaining({ message: 'uncaught, outside the invocation' }) },
      },
    ]);
    expect(await invoke(fns, 'crashing', { crash: false })).toEqual({ kind: 'returned', value: 'finished' });
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
      /- no-handler: Runtime\.HandlerNotFound: .*no-handler\.ts: handler is undefined or not exported\n {2}- throws-at-init: Error: environment variable TABLE is required$/,
    );
  });
});
