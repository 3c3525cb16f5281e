import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { build } from 'esbuild';
import { LAMBDA_BUNDLING, LAMBDA_NODE_OPTIONS, LAMBDA_RUNTIME } from '../lib/infra/service-function';
import { interleave, type LatencySummary, median, summarize } from './measure';

const run = promisify(execFile);
const ROOT = resolve(__dirname, '..');

/** The two handlers compared: the deployed payments function, and the same function on Powertools idempotency. */
export const COLD_START_HANDLERS = [
  { name: 'ours', entry: 'functions/payments-create.ts' },
  { name: 'powertools', entry: 'bench/powertools-payments-handler.ts' },
] as const;
export type HandlerName = (typeof COLD_START_HANDLERS)[number]['name'];

export interface BundleResult {
  readonly name: HandlerName;
  readonly entry: string;
  /** The .mjs Lambda loads. */
  readonly bytes: number;
  readonly gzipBytes: number;
  /** The source map next to it (deployed too; read by --enable-source-maps only when a stack trace is mapped). */
  readonly mapBytes: number;
  /** `await import(bundle)` in a fresh `node` process, one sample per process. */
  readonly importMs: LatencySummary & { readonly median: number };
}

export interface ColdStartResult {
  readonly bundles: BundleResult[];
  readonly esbuild: typeof ESBUILD_OPTIONS;
  readonly nodeOptions: string;
  /** Bundling literals of the stack this benchmark no longer matches: empty when it bundles as the stack does. */
}

/**
 * Dummy configuration: the handlers read it at import (cold start) and fail fast without it. Nothing is contacted at
 * import, so none of it has to exist.
 */
const IMPORT_ENV = {
  AWS_REGION: 'us-east-1',
  IDEMPOTENCY_TABLE: 'bench-cold-idempotency',
  PAYMENTS_TABLE: 'bench-cold-payments',
  PROCESSOR_URL: 'https://processor.invalid',
};

/**
 * As the function runs: the stack sets `NODE_OPTIONS=--enable-source-maps` on every function. `--no-warnings` only
 * silences the SDK's "Node 20 is ending support" notice, which Lambda's Node 22 runtime never prints.
 */
const NODE_OPTIONS = `${LAMBDA_NODE_OPTIONS.NODE_OPTIONS} --no-warnings`;

/** Timed inside the fresh process, around the import only: process start-up is not the handler's to own. */
const IMPORT_SCRIPT = [
  'const started = performance.now();',
  'const module = await import(process.env.BENCH_BUNDLE_URL);',
  'const ms = performance.now() - started;',
  "if (typeof module.handler !== 'function') throw new Error('no handler export');",
  'process.stdout.write(JSON.stringify({ ms }));',
].join('\n');

/**
 * esbuild as the CDK stack runs it for every function, derived from the stack's own options (lib/infra), so the
 * bench can't drift from what is deployed. CDK turns them into `esbuild --bundle --target=node22 --platform=node
 * --format=esm --minify --sourcemap --main-fields=module,main --banner:js=...`, with no `--external` since the SDK is
 * bundled (`bundleAwsSDK: true`).
 */
export const ESBUILD_OPTIONS = {
  bundle: true,
  platform: 'node',
  target: LAMBDA_RUNTIME.name.replace(/^nodejs(\d+)\.x$/, 'node$1'),
  format: LAMBDA_BUNDLING.format === OutputFormat.ESM ? 'esm' : 'cjs',
  minify: LAMBDA_BUNDLING.minify ?? false,
  sourcemap: LAMBDA_BUNDLING.sourceMap ?? false,
  mainFields: [...(LAMBDA_BUNDLING.mainFields ?? [])],
  ...(LAMBDA_BUNDLING.banner ? { banner: { js: LAMBDA_BUNDLING.banner } } : {}),
  // Tracing compiled out, as in an environment without it (dev); without this the tracer would be bundled.
  define: { ...LAMBDA_BUNDLING.define },
} as const;

/**
 * Bundles both handlers as the stack does, then imports each bundle in `runs` fresh processes, alternating between
 * the two.
 */
export async function measureColdStart(options: { runs: number }): Promise<ColdStartResult> {
  const dir = await mkdtemp(join(tmpdir(), 'keystone-bench-'));
  try {
    const outputs = new Map<HandlerName, string>();
    for (const handler of COLD_START_HANDLERS) {
      const outfile = join(dir, handler.name, 'index.mjs');
      await build({
        ...ESBUILD_OPTIONS,
        mainFields: [...ESBUILD_OPTIONS.mainFields],
        entryPoints: [join(ROOT, handler.entry)],
        outfile,
        logLevel: 'error',
      });
      outputs.set(handler.name, outfile);
    }
    const samples = new Map<HandlerName, number[]>(COLD_START_HANDLERS.map((handler) => [handler.name, []]));
    // One unmeasured import each first, so neither pays for a cold file cache.
    for (const handler of COLD_START_HANDLERS) await importOnce(outputs.get(handler.name) as string);
    await interleave(COLD_START_HANDLERS, options.runs, async (handler) => {
      samples.get(handler.name)?.push(await importOnce(outputs.get(handler.name) as string));
    });
    const bundles: BundleResult[] = [];
    for (const handler of COLD_START_HANDLERS) {
      const file = outputs.get(handler.name) as string;
      const code = await readFile(file);
      const timings = samples.get(handler.name) ?? [];
      bundles.push({
        name: handler.name,
        entry: handler.entry,
        bytes: code.byteLength,
        gzipBytes: gzipSync(code).byteLength,
        mapBytes: await stat(`${file}.map`).then(
          (info) => info.size,
          () => 0,
        ),
        importMs: { ...summarize(timings), median: median(timings) },
      });
    }
    return { bundles, esbuild: ESBUILD_OPTIONS, nodeOptions: NODE_OPTIONS };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function importOnce(bundle: string): Promise<number> {
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', IMPORT_SCRIPT], {
    cwd: tmpdir(),
    env: {
      PATH: process.env.PATH ?? '',
      ...IMPORT_ENV,
      NODE_OPTIONS,
      BENCH_BUNDLE_URL: pathToFileURL(bundle).href,
    },
    timeout: 30_000,
  });
  return (JSON.parse(stdout) as { ms: number }).ms;
}
