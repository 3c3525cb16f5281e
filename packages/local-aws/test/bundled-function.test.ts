import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BundledFunction, startBundledFunction } from '../src/bundled-function';
import { invokeLambda } from '../src/lambda-invoke';

/**
 * The bundled-function host against real processes and small hand-written ES module bundles: each test writes the
 * bundle it needs into a directory of its own, as `cdk synth` writes an asset.
 */
jest.setTimeout(30_000);

const root = join(__dirname, '..', '..');
const directories: string[] = [];
const started: BundledFunction[] = [];

afterEach(async () => {
  await Promise.all(started.splice(0).map((fn) => fn.stop()));
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
});

/** A bundle in a new directory (under `parent`, default the system's temp directory). */
function bundle(source: string, parent = tmpdir()): string {
  mkdirSync(parent, { recursive: true });
  const directory = mkdtempSync(join(parent, 'keystone-bundle-'));
  directories.push(directory);
  writeFileSync(join(directory, 'index.mjs'), source);
  return directory;
}

/** Reports what the environment it runs in looks like, waits when asked to, and fails when asked to. */
const INSPECTING_HANDLER = `
export const handler = async (event, context) => {
  if (event.sleepMs) await new Promise((resolve) => setTimeout(resolve, event.sleepMs));
  if (event.fail) throw Object.assign(new Error(event.fail), { name: 'ChargeDeclinedError' });
  return {
    event,
    pid: process.pid,
    cwd: process.cwd(),
    env: { ...process.env },
    functionName: context.functionName,
    memoryLimitInMB: context.memoryLimitInMB,
    remainingMs: context.getRemainingTimeInMillis(),
  };
};
`;

interface Report {
  event: unknown;
  pid: number;
  cwd: string;
  env: Record<string, string>;
  functionName: string;
  memoryLimitInMB: string;
  remainingMs: number;
}

function start(
  codeDirectory: string,
  environment: Record<string, string> = {},
  pool: { concurrency?: number; idleMs?: number } = {},
) {
  const fn = startBundledFunction({
    functionName: 'payments-test',
    codeDirectory,
    handler: 'index.handler',
    runtime: 'nodejs22.x',
    memoryMb: 256,
    environment,
    ...pool,
    output: () => undefined,
  });
  started.push(fn);
  return fn;
}

async function invoke(fn: BundledFunction, event: unknown, timeoutMs = 10_000) {
  return invokeLambda(fn.handler, event, { functionName: 'payments-test', timeoutMs }).outcome;
}

async function report(fn: BundledFunction, event: unknown = {}): Promise<Report> {
  const outcome = await invoke(fn, event);
  if (outcome.kind !== 'returned') throw new Error(`expected a result, got ${JSON.stringify(outcome)}`);
  return outcome.value as Report;
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('startBundledFunction', () => {
  it('runs the export the handler names with the event and a Lambda context whose time runs down', async () => {
    const fn = start(bundle(INSPECTING_HANDLER));
    const result = await report(fn, { amount: 4200 });
    expect(result.event).toEqual({ amount: 4200 });
    expect(result.functionName).toBe('payments-test');
    expect(result.memoryLimitInMB).toBe('256');
    expect(result.remainingMs).toBeGreaterThan(0);
    expect(result.remainingMs).toBeLessThanOrEqual(10_000);
  });

  it("gives the function exactly its own variables and the ones Lambda adds, nothing of its caller's", async () => {
    process.env.KEYSTONE_ONLY_IN_THE_CALLER = 'must not leak';
    try {
      const fn = start(bundle(INSPECTING_HANDLER), { PAYMENTS_TABLE: 'payments-local', LOG_LEVEL: 'DEBUG' });
      const { env, cwd } = await report(fn);
      expect(Object.keys(env).sort()).toEqual(
        [
          'PAYMENTS_TABLE',
          'LOG_LEVEL',
          // What the Lambda service sets in every environment
          '_HANDLER',
          'AWS_REGION',
          'AWS_DEFAULT_REGION',
          'AWS_EXECUTION_ENV',
          'AWS_LAMBDA_FUNCTION_NAME',
          'AWS_LAMBDA_FUNCTION_VERSION',
          'AWS_LAMBDA_FUNCTION_MEMORY_SIZE',
          'AWS_LAMBDA_INITIALIZATION_TYPE',
          'AWS_LAMBDA_LOG_GROUP_NAME',
          'AWS_ACCESS_KEY_ID',
          'AWS_SECRET_ACCESS_KEY',
          'LAMBDA_TASK_ROOT',
          'PATH',
          'LANG',
          'TZ',
          // Local only
          'AWS_SAM_LOCAL',
          'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED',
        ].sort(),
      );
      expect(env).toMatchObject({
        PAYMENTS_TABLE: 'payments-local',
        _HANDLER: 'index.handler',
        AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
        AWS_LAMBDA_FUNCTION_NAME: 'payments-test',
        AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '256',
        AWS_ACCESS_KEY_ID: 'local',
        LAMBDA_TASK_ROOT: cwd,
      });
    } finally {
      delete process.env.KEYSTONE_ONLY_IN_THE_CALLER;
    }
  });

  it('runs from a copy of its code, so an import the bundle does not carry fails as it would in Lambda', async () => {
    // Inside this repository, `canonicalize` resolves from its node_modules; in /var/task it would not.
    const source = `import canonicalize from 'canonicalize';\nexport const handler = async () => canonicalize({ b: 1, a: 2 });\n`;
    const insideTheRepository = bundle(source, join(root, 'node_modules', '.cache'));
    const fn = start(insideTheRepository);
    await expect(fn.warm()).rejects.toMatchObject({
      name: 'Runtime.ImportModuleError',
      message: expect.stringContaining("Cannot find package 'canonicalize'"),
    });
  });

  it('runs concurrent invocations in environments of their own, and reuses a free one after', async () => {
    const fn = start(bundle(INSPECTING_HANDLER));
    const [first, second] = await Promise.all([report(fn, { sleepMs: 300 }), report(fn, { sleepMs: 300 })]);
    expect(first.pid).not.toBe(second.pid);
    const third = await report(fn);
    expect([first.pid, second.pid]).toContain(third.pid);
    expect(fn.environmentPids().sort()).toEqual([first.pid, second.pid].sort());
  });

  it('starts an environment per concurrent invocation, up to its concurrency', async () => {
    const fn = start(bundle(INSPECTING_HANDLER), {}, { concurrency: 5 });
    // Long enough that none is free before the others' environments have started, on a loaded machine too.
    const running = Promise.all(Array.from({ length: 5 }, () => report(fn, { sleepMs: 8_000 })));
    await waitUntil(() => fn.environmentPids().length === 5, 8_000);
    const results = await running;
    expect(new Set(results.map(({ pid }) => pid)).size).toBe(5);
  });

  it('starts environments for invocations that wait behind ones running longer than usual', async () => {
    const fn = start(bundle(INSPECTING_HANDLER), {}, { concurrency: 4 });
    // Invocations of milliseconds, so far.
    await report(fn);
    await report(fn);
    const running = Promise.all(Array.from({ length: 4 }, () => report(fn, { sleepMs: 6_000 })));
    await waitUntil(() => fn.environmentPids().length === 4, 6_000);
    expect(new Set((await running).map(({ pid }) => pid)).size).toBe(4);
  });

  it('throttles an invocation past its concurrency at once, as Lambda does, and takes the next one again', async () => {
    const fn = start(bundle(INSPECTING_HANDLER), {}, { concurrency: 1 });
    const running = invoke(fn, { sleepMs: 1_500 });
    await waitUntil(() => fn.environmentPids().length === 1);
    const startedAt = Date.now();
    const throttled = await invoke(fn, {});
    expect(throttled).toMatchObject({
      kind: 'throttled',
      error: { name: 'TooManyRequestsException', reason: 'ConcurrentInvocationLimitExceeded' },
    });
    expect(Date.now() - startedAt).toBeLessThan(1_000);
    expect(await running).toMatchObject({ kind: 'returned' });
    expect(await invoke(fn, {})).toMatchObject({ kind: 'returned' });
  });

  it("counts an invocation's timeout from when its environment starts it: a cold start's init is not its time", async () => {
    // An init of a second and a half (a module that awaits at its top level), for an invocation of one second.
    const slowInit = `await new Promise((resolve) => setTimeout(resolve, 1_500));\n${INSPECTING_HANDLER}`;
    const fn = start(bundle(slowInit));
    const outcome = await invoke(fn, {}, 1_000);
    expect(outcome).toMatchObject({ kind: 'returned' });
    const { remainingMs } = (outcome as { value: Report }).value;
    expect(remainingMs).toBeGreaterThan(500);
  });

  it("counts an invocation's timeout from when its environment starts it: the wait for a free one is not its time", async () => {
    // Every environment busy: the second invocation waits for the first's (a new one would take longer to init).
    const slowInit = `await new Promise((resolve) => setTimeout(resolve, 3_000));\n${INSPECTING_HANDLER}`;
    const fn = start(bundle(slowInit));
    await fn.warm();
    const first = invoke(fn, { sleepMs: 800 }, 5_000);
    await new Promise((resolve) => setTimeout(resolve, 100));
    // 700 ms of waiting and 500 of running: past its one second if the wait counted.
    const second = await invoke(fn, { sleepMs: 500 }, 1_000);
    expect(second).toMatchObject({ kind: 'returned' });
    expect(await first).toMatchObject({ kind: 'returned' });
  });

  it('stops the environments idle for longer than its idle time, keeping one warm', async () => {
    const fn = start(bundle(INSPECTING_HANDLER), {}, { idleMs: 1_000 });
    const running = Promise.all(Array.from({ length: 3 }, () => report(fn, { sleepMs: 6_000 })));
    await waitUntil(() => fn.environmentPids().length === 3, 6_000);
    const results = await running;
    await waitUntil(() => fn.environmentPids().length === 1, 10_000);
    await waitUntil(() => results.filter(({ pid }) => isRunning(pid)).length === 1);
    expect(await report(fn)).toMatchObject({ pid: fn.environmentPids()[0] });
  });

  it('fails an invocation whose environment is killed, and gives its place to the next (a crash)', async () => {
    const fn = start(bundle(INSPECTING_HANDLER), {}, { concurrency: 1 });
    const { pid } = await report(fn);
    const running = invoke(fn, { sleepMs: 5_000 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    process.kill(pid, 'SIGKILL');
    expect(await running).toMatchObject({
      kind: 'threw',
      error: { name: 'Runtime.ExitError', message: 'Runtime exited with error: signal: SIGKILL' },
    });
    const next = await report(fn);
    expect(next.pid).not.toBe(pid);
  });

  it('ends an environment that stops answering mid-invocation at its deadline, and starts a new one', async () => {
    const fn = start(bundle(INSPECTING_HANDLER), {}, { concurrency: 1 });
    const { pid } = await report(fn);
    const running = invoke(fn, { sleepMs: 100 }, 1_000);
    // Stopped, not killed: no exit, no answer, as a process stuck on a silent connection.
    process.kill(pid, 'SIGSTOP');
    expect(await running).toEqual({ kind: 'timed-out', timeoutMs: 1_000 });
    await waitUntil(() => !isRunning(pid));
    expect((await report(fn)).pid).not.toBe(pid);
  });

  it("reports a handler's error with the error's own name and message", async () => {
    const fn = start(bundle(INSPECTING_HANDLER));
    const outcome = await invoke(fn, { fail: 'card declined' });
    expect(outcome).toMatchObject({
      kind: 'threw',
      error: { name: 'ChargeDeclinedError', message: 'card declined' },
    });
  });

  it('ends an environment whose invocation times out, and starts a new one for the next', async () => {
    const fn = start(bundle(INSPECTING_HANDLER));
    const before = await report(fn);
    const outcome = await invoke(fn, { sleepMs: 5_000 }, 500);
    expect(outcome).toEqual({ kind: 'timed-out', timeoutMs: 500 });
    await waitUntil(() => !isRunning(before.pid));
    const after = await report(fn);
    expect(after.pid).not.toBe(before.pid);
  });

  it('leaves no process and no copy of the code behind once stopped', async () => {
    const fn = start(bundle(INSPECTING_HANDLER));
    const { pid, cwd } = await report(fn);
    await fn.stop();
    expect(isRunning(pid)).toBe(false);
    expect(existsSync(cwd)).toBe(false);
  });

  it('refuses a configuration that sets a variable Lambda reserves for itself', () => {
    expect(() => start(bundle(INSPECTING_HANDLER), { AWS_REGION: 'eu-west-1' })).toThrow(
      'payments-test sets AWS_REGION, which Lambda reserves for itself',
    );
  });

  describe('a bundle that cannot be loaded fails to initialise, with the error Lambda reports', () => {
    it('when the handler names an export the module does not have', async () => {
      const fn = start(bundle('export const main = async () => "renamed";\n'));
      await expect(fn.warm()).rejects.toMatchObject({
        name: 'Runtime.HandlerNotFound',
        message: 'index.handler is undefined or not exported',
      });
    });

    it('when the module imports a package that is not there', async () => {
      const fn = start(bundle("import 'keystone-package-nobody-published';\nexport const handler = async () => 1;\n"));
      await expect(fn.warm()).rejects.toMatchObject({
        name: 'Runtime.ImportModuleError',
        message: expect.stringContaining("Cannot find package 'keystone-package-nobody-published'"),
      });
    });

    it("when the module's top level throws, as a missing variable read at cold start does", async () => {
      const source = `if (!process.env.PAYMENTS_TABLE) {
  throw Object.assign(new Error('environment variable PAYMENTS_TABLE is required'), { name: 'ConfigurationError' });
}
export const handler = async () => 1;
`;
      const fn = start(bundle(source));
      await expect(fn.warm()).rejects.toMatchObject({
        name: 'ConfigurationError',
        message: 'environment variable PAYMENTS_TABLE is required',
      });
      // An invocation fails the same way: its cold start runs the same init.
      expect(await invoke(fn, {})).toMatchObject({ kind: 'threw', error: { name: 'ConfigurationError' } });
    });
  });
});

async function waitUntil(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
