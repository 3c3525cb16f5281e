import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BuildOptions } from 'esbuild';
import { type BundledFunction, type BundledFunctionOptions, startBundledFunction } from './bundled-function';
import type { LambdaErrorReport } from './execution-environment';
import type { LambdaHandler } from './lambda-invoke';

/** One function run from its source: the name it is invoked by, and its entry file, which exports `handler`. */
export interface SourceFunction {
  readonly name: string;
  /** An absolute path to a `.ts` (or `.js`) file. */
  readonly entry: string;
  /** `AWS_LAMBDA_FUNCTION_MEMORY_SIZE` and the context's `memoryLimitInMB`. Default 128, Lambda's. */
  readonly memoryMb?: number;
  /** Invocations in flight at most, past which one is throttled (bundled-function.ts's default: 10). */
  readonly concurrency?: number;
  /** Whether `concurrency` is the function's own reservation. */
  readonly reserved?: boolean;
}

/**
 * How the sources are bundled: the options lib/infra/service-function.ts gives `NodejsFunction` (LAMBDA_BUNDLING),
 * in esbuild's own terms (test/local/source-functions.test.ts holds the two together). That module loads the CDK,
 * seconds of import for the local stack, so the options are written out here rather than imported from it.
 * - an ES module for node22, the SDK's ES builds first (`mainFields`), the AWS SDK bundled, not taken from a runtime;
 * - ESM has no `require`, and some bundled CommonJS code still calls it: the banner gives the module one;
 * - minified with a source map, as deployed; the environments run with `--enable-source-maps` (LAMBDA_NODE_OPTIONS),
 *   so a stack trace names the TypeScript file and line.
 */
export const SOURCE_BUNDLING = {
  bundle: true,
  platform: 'node',
  target: 'node22',
  format: 'esm',
  mainFields: ['module', 'main'],
  banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
  minify: true,
  sourcemap: true,
  sourcesContent: false,
} as const satisfies BuildOptions;

/** What the deployed functions run with (lib/infra/service-function.ts, LAMBDA_NODE_OPTIONS): mapped stack traces. */
export const SOURCE_NODE_OPTIONS = { NODE_OPTIONS: '--enable-source-maps' } as const;

export interface SourceBundleOptions {
  readonly functions: readonly SourceFunction[];
  /** The tsconfig.json esbuild reads for the entries. Default: esbuild's lookup, per file. */
  readonly tsconfig?: string;
  /**
   * Bundle-time constants, as the deployment sets them (`process.env.STORE`, `process.env.POWERTOOLS_TRACE_ENABLED`:
   * the deployment's bundling), each value a JavaScript expression (a JSON string literal).
   */
  readonly define?: Readonly<Record<string, string>>;
  /**
   * Export conditions to resolve packages under, besides esbuild's own (a workspace package's condition that maps
   * its entry points to their sources, as the deployment's bundling passes it).
   */
  readonly conditions?: readonly string[];
}

/** The bundles of some functions, one directory each (`index.mjs` and its source map), in a directory of this run's. */
export interface SourceBundle {
  /** By function name: the directory to run it from, as CDK's asset directory is a deployed function's. */
  readonly codeDirectories: ReadonlyMap<string, string>;
  readonly bundleMs: number;
  /** Removes the bundles. */
  remove(): void;
}

/**
 * Bundles every function's source in one esbuild call, into a temporary directory (removed by `remove()`, or when
 * this process exits). Rejects with a `SourceInitError` when the sources can't be bundled (a syntax error, an import
 * that resolves nowhere): no function would load, as no deployment would build.
 */
export async function bundleSources(options: SourceBundleOptions): Promise<SourceBundle> {
  const startedAt = performance.now();
  const { build } = await import('esbuild');
  removeOrphanedBundles();
  const directory = mkdtempSync(join(tmpdir(), `${BUNDLES_PREFIX}${process.pid}-`));
  const remove = () => rmSync(directory, { recursive: true, force: true });
  process.once('exit', remove);
  const removeNow = () => {
    process.off('exit', remove);
    remove();
  };
  try {
    await build({
      ...SOURCE_BUNDLING,
      entryPoints: Object.fromEntries(options.functions.map(({ name, entry }) => [`${name}/index`, entry])),
      outdir: directory,
      outExtension: { '.js': '.mjs' },
      ...(options.tsconfig ? { tsconfig: options.tsconfig } : {}),
      define: { ...options.define },
      ...(options.conditions ? { conditions: [...options.conditions] } : {}),
      logLevel: 'silent',
    });
  } catch (error) {
    removeNow();
    throw new SourceInitError([{ name: 'esbuild', error: bundleError(error) }]);
  }
  return {
    codeDirectories: new Map(options.functions.map(({ name }) => [name, join(directory, name)])),
    bundleMs: Math.round(performance.now() - startedAt),
    remove: removeNow,
  };
}

export interface SourceFunctionsOptions extends SourceBundleOptions {
  /**
   * Every function's own environment (what it reads its configuration from at import): nothing of this process's
   * environment reaches them but what is in here. The Lambda service's variables are added (bundled-function.ts),
   * so this must not set one; `NODE_OPTIONS` is `--enable-source-maps` unless this sets it.
   */
  readonly environment: Readonly<Record<string, string | undefined>>;
  /** The bundles, when they were started earlier (the local stack bundles while its database starts). */
  readonly bundle?: Promise<SourceBundle>;
  /** Default: this process's stdout and stderr, each line prefixed with the function's name. */
  readonly output?: BundledFunctionOptions['output'];
}

/** Functions running from their sources, each in execution environments of its own. */
export interface SourceFunctions {
  /** By function name: invokes it, as Lambda calls the handler. */
  // biome-ignore lint/suspicious/noExplicitAny: the event and result are whatever its trigger sends and takes
  readonly handlers: ReadonlyMap<string, LambdaHandler<any, any>>;
  /** By function name: its environments (their process ids, for a test). */
  readonly functions: ReadonlyMap<string, BundledFunction>;
  /** How long the start took: bundling, and the init of each function's first environment. */
  readonly initMs: number;
  /** Kills every environment and removes the bundles. */
  stop(): Promise<void>;
}

/** An init that failed: which function, and what Lambda would report. */
export class SourceInitError extends Error {
  constructor(readonly failures: readonly { readonly name: string; readonly error: LambdaErrorReport }[]) {
    super(
      `The functions failed to initialise:\n${failures
        .map(({ name, error }) => `  - ${name}: ${error.errorType}: ${error.errorMessage}`)
        .join('\n')}`,
    );
    this.name = 'SourceInitError';
  }
}

/**
 * Starts functions from their TypeScript sources the way Lambda runs them: bundled as the deployment bundles them
 * (`bundleSources`), and run from those bundles on the same machinery as the deployed bundles
 * (bundled-function.ts): each invocation in an execution environment of its own at a time, a process with exactly
 * its function's environment, reused while healthy, killed at the invocation's timeout (with whatever it held:
 * connections, locks, timers) and replaced by a new one for the next. The handler code is the one Lambda runs,
 * only not zipped.
 *
 * Resolves once each function's first environment has loaded its bundle (rejects with a `SourceInitError` naming
 * each that failed, as a bundle that can't load stops a bundled run).
 *
 * @example
 * const fns = await startSourceFunctions({
 *   functions: [{ name: 'payments-get', entry: '/repo/functions/payments-get.ts' }],
 *   environment: { PAYMENTS_TABLE: 'local-payments', DYNAMODB_ENDPOINT: db },
 * });
 * const invocation = invokeLambda(fns.handlers.get('payments-get')!, event, { functionName: 'payments-get' });
 */
export async function startSourceFunctions(options: SourceFunctionsOptions): Promise<SourceFunctions> {
  const startedAt = performance.now();
  const bundle = await (options.bundle ?? bundleSources(options));
  const functions = new Map<string, BundledFunction>();
  const stop = async () => {
    await Promise.all([...functions.values()].map((fn) => fn.stop()));
    bundle.remove();
  };
  try {
    const environment = { ...SOURCE_NODE_OPTIONS, ...definedOnly(options.environment) };
    for (const { name, memoryMb, concurrency, reserved } of options.functions) {
      const codeDirectory = bundle.codeDirectories.get(name);
      if (!codeDirectory) throw new Error(`the bundles have no function ${name}`);
      functions.set(
        name,
        startBundledFunction({
          functionName: name,
          codeDirectory,
          // The bundle is this run's own: its source map's paths are relative to where it was written.
          runInPlace: true,
          handler: 'index.handler',
          runtime: 'nodejs22.x',
          memoryMb: memoryMb ?? 128,
          environment,
          ...(options.output ? { output: options.output } : {}),
          ...(concurrency ? { concurrency, reserved: reserved ?? false } : {}),
        }),
      );
    }
  } catch (error) {
    await stop();
    throw error;
  }
  const inits = await Promise.allSettled([...functions.values()].map((fn) => fn.warm()));
  const failures = inits.flatMap((init, index) =>
    init.status === 'rejected' ? [{ name: options.functions[index]!.name, error: initError(init.reason) }] : [],
  );
  if (failures.length > 0) {
    await stop();
    throw new SourceInitError(failures);
  }
  return {
    handlers: new Map([...functions].map(([name, fn]) => [name, fn.handler])),
    functions,
    initMs: Math.round(performance.now() - startedAt),
    stop,
  };
}

function initError(error: unknown): LambdaErrorReport {
  if (error instanceof Error) {
    const errorType = 'errorType' in error && typeof error.errorType === 'string' ? error.errorType : error.name;
    return { errorType, errorMessage: error.message, ...(error.stack ? { stack: error.stack } : {}) };
  }
  return { errorType: typeof error, errorMessage: String(error) };
}

/** Each run's bundles are in `<tmpdir>/keystone-sources-<pid>-<random>`. */
const BUNDLES_PREFIX = 'keystone-sources-';

/**
 * Removes the bundles of runs whose process is gone without removing them (killed: a test's crash, SIGKILL), so
 * they don't pile up in the temporary directory.
 */
function removeOrphanedBundles(): void {
  const pattern = new RegExp(`^${BUNDLES_PREFIX}(\\d+)-`);
  for (const name of readdirSync(tmpdir())) {
    const pid = Number(pattern.exec(name)?.[1]);
    if (pid > 0 && !isRunning(pid)) rmSync(join(tmpdir(), name), { recursive: true, force: true });
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** esbuild's failure, its messages one per line with where each is. */
function bundleError(error: unknown): LambdaErrorReport {
  const messages = (error as { errors?: { text: string; location?: { file: string; line: number } | null }[] }).errors;
  if (!messages?.length) return { errorType: 'Runtime.BundleError', errorMessage: String(error) };
  return {
    errorType: 'Runtime.BundleError',
    errorMessage: messages
      .map(({ text, location }) => (location ? `${location.file}:${location.line}: ${text}` : text))
      .join('; '),
  };
}

/** `process.env` holds strings only: an unset variable is left out, not passed as "undefined". */
function definedOnly(environment: Readonly<Record<string, string | undefined>>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(environment).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
}
