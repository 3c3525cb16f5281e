import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { build, type Metafile } from 'esbuild';
import { BUNDLE_CONDITIONS } from '../lib/infra/library-source';
import {
  LAMBDA_BUNDLING,
  LAMBDA_NODE_OPTIONS,
  LAMBDA_RUNTIME,
  lambdaBundling,
  TRACE_ENABLED_ENV,
} from '../lib/infra/service-function';
import { interleave, type LatencySummary, median, summarize } from './measure';

const run = promisify(execFile);
const ROOT = resolve(__dirname, '..');

/**
 * The bundles compared: the deployed payments function as dev builds it (tracing compiled out) and as prod builds
 * it (tracing on), and the same function on Powertools idempotency, which shares our validation, problem responses
 * and processor client (so also our schemas).
 *
 * `powertools-classic-zod` is that same Powertools handler with our schemas compiled against classic zod: what it was
 * when the issue set the import-time target (844 against 857 KB, both carrying all of classic zod). It is built from
 * the same schema sources, `zod/mini` mapped onto classic zod (bench/classic-zod.ts), not from a second definition.
 * `sdk-floor` is what every one of them pays before any code of its own: the DynamoDB client.
 *
 * The store is chosen at bundle time (`storeDefine`, lib/infra/service-function.ts): the stack deploys DynamoDB
 * bundles, which carry neither pg nor the RDS signer, and those are what the first rows measure. `ours-postgres` is
 * the same function bundled for STORE=postgres (pg, the RDS signer for IAM authentication, no DynamoDB client).
 */
export const COLD_START_BUNDLES = [
  { name: 'ours', entry: 'functions/payments-create.ts', tracing: false, classicZod: false, store: 'dynamodb' },
  { name: 'ours-traced', entry: 'functions/payments-create.ts', tracing: true, classicZod: false, store: 'dynamodb' },
  {
    name: 'ours-postgres',
    entry: 'functions/payments-create.ts',
    tracing: false,
    classicZod: false,
    store: 'postgres',
  },
  {
    name: 'powertools',
    entry: 'bench/powertools-payments-handler.ts',
    tracing: false,
    classicZod: false,
    store: 'dynamodb',
  },
  {
    name: 'powertools-classic-zod',
    entry: 'bench/powertools-payments-handler.ts',
    tracing: false,
    classicZod: true,
    store: 'dynamodb',
  },
  { name: 'sdk-floor', entry: 'bench/sdk-floor.ts', tracing: false, classicZod: false, store: 'dynamodb' },
] as const;
export type BundleName = (typeof COLD_START_BUNDLES)[number]['name'];

export const BUNDLE_LABELS: Record<BundleName, string> = {
  ours: 'ours, dev (tracing compiled out)',
  'ours-traced': 'ours, prod (tracing on)',
  'ours-postgres': 'ours on PostgreSQL (STORE=postgres, tracing compiled out)',
  powertools: 'Powertools equivalent, same schemas (zod/mini)',
  'powertools-classic-zod': 'Powertools equivalent, schemas on classic zod (as when the target was set)',
  'sdk-floor': 'floor: the DynamoDB client alone, as both create it',
};

export interface BundleResult {
  readonly name: BundleName;
  readonly entry: string;
  /** Tracing compiled in (prod) or out (dev). */
  readonly tracing: boolean;
  /** The .mjs Lambda loads. */
  readonly bytes: number;
  readonly gzipBytes: number;
  /** The source map next to it (deployed too; read by --enable-source-maps only when a stack trace is mapped). */
  readonly mapBytes: number;
  /** `await import(bundle)` in a fresh `node` process, one sample per process. */
  readonly importMs: LatencySummary & { readonly median: number };
  /** Every import's time, in the order measured (for intervals of ratios between bundles). */
  readonly importSamples: readonly number[];
  /** What the bundle is made of: minified bytes per package (ours: this repository's files), largest first. */
  readonly parts: readonly BundlePart[];
}

export interface BundlePart {
  readonly name: string;
  readonly bytes: number;
}

export interface ColdStartResult {
  readonly bundles: BundleResult[];
  readonly esbuild: typeof ESBUILD_OPTIONS;
  readonly nodeOptions: string;
  /** Bundling literals of the stack this benchmark no longer matches: empty when it bundles as the stack does. */
}

/**
 * Dummy configuration: the handlers read it at import (cold start) and fail fast without it. Nothing is contacted at
 * import, so none of it has to exist. `AWS_EXECUTION_ENV` is what Lambda sets: without it, Powertools Tracer turns
 * itself off at import, and a traced bundle would skip the work it does on Lambda (patching http, https and fetch).
 */
const IMPORT_ENV = {
  AWS_REGION: 'us-east-1',
  AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
  IDEMPOTENCY_TABLE: 'bench-cold-idempotency',
  PAYMENTS_TABLE: 'bench-cold-payments',
  PROCESSOR_URL: 'https://processor.invalid',
  // Read by the PostgreSQL bundle only; the pool it builds at import connects on first use.
  DATABASE_URL: 'postgres://bench@127.0.0.1:9/bench',
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
 * --format=esm --minify --sourcemap --sources-content=false --main-fields=module,main --banner:js=...`, with no `--external` since the SDK is
 * bundled (`bundleAwsSDK: true`).
 */
export const ESBUILD_OPTIONS = {
  bundle: true,
  platform: 'node',
  target: LAMBDA_RUNTIME.name.replace(/^nodejs(\d+)\.x$/, 'node$1'),
  format: LAMBDA_BUNDLING.format === OutputFormat.ESM ? 'esm' : 'cjs',
  minify: LAMBDA_BUNDLING.minify ?? false,
  sourcemap: LAMBDA_BUNDLING.sourceMap ?? false,
  sourcesContent: LAMBDA_BUNDLING.sourcesContent ?? true,
  mainFields: [...(LAMBDA_BUNDLING.mainFields ?? [])],
  conditions: [...BUNDLE_CONDITIONS] as string[],
  ...(LAMBDA_BUNDLING.banner ? { banner: { js: LAMBDA_BUNDLING.banner } } : {}),
  // Tracing compiled out, as in an environment without it (dev); a bundle that has it uses lambdaBundling's define.
  define: { ...LAMBDA_BUNDLING.define },
} as const;

/** `zod/mini`, as classic zod (for the reference bundle that has the schemas on classic zod). */
const CLASSIC_ZOD = join(ROOT, 'bench', 'classic-zod.ts');

/**
 * Bundles each as the stack does, then imports each bundle in `runs` fresh processes, interleaved (the order rotates
 * each round).
 */
export async function measureColdStart(options: { runs: number }): Promise<ColdStartResult> {
  const dir = await mkdtemp(join(tmpdir(), 'keystone-bench-'));
  try {
    const outputs = new Map<BundleName, { file: string; metafile: Metafile }>();
    for (const bundle of COLD_START_BUNDLES) {
      const outfile = join(dir, bundle.name, 'index.mjs');
      const { metafile } = await build({
        ...ESBUILD_OPTIONS,
        mainFields: [...ESBUILD_OPTIONS.mainFields],
        define: { ...lambdaBundling({ tracing: bundle.tracing, store: bundle.store }).define },
        ...(bundle.classicZod ? { alias: { 'zod/mini': CLASSIC_ZOD } } : {}),
        entryPoints: [join(ROOT, bundle.entry)],
        outfile,
        metafile: true,
        logLevel: 'error',
      });
      outputs.set(bundle.name, { file: outfile, metafile });
    }
    const fileOf = (name: BundleName) => outputs.get(name)?.file as string;
    const envOf = (bundle: (typeof COLD_START_BUNDLES)[number]) => ({
      [TRACE_ENABLED_ENV]: String(bundle.tracing),
      STORE: bundle.store,
    });
    const samples = new Map<BundleName, number[]>(COLD_START_BUNDLES.map((bundle) => [bundle.name, []]));
    // One unmeasured import each first, so none pays for a cold file cache.
    for (const bundle of COLD_START_BUNDLES) await importOnce(fileOf(bundle.name), envOf(bundle));
    await interleave(COLD_START_BUNDLES, options.runs, async (bundle) => {
      samples.get(bundle.name)?.push(await importOnce(fileOf(bundle.name), envOf(bundle)));
    });
    const bundles: BundleResult[] = [];
    for (const bundle of COLD_START_BUNDLES) {
      const file = fileOf(bundle.name);
      const code = await readFile(file);
      const timings = samples.get(bundle.name) ?? [];
      bundles.push({
        name: bundle.name,
        entry: bundle.entry,
        tracing: bundle.tracing,
        bytes: code.byteLength,
        gzipBytes: gzipSync(code).byteLength,
        mapBytes: await stat(`${file}.map`).then(
          (info) => info.size,
          () => 0,
        ),
        importMs: { ...summarize(timings), median: median(timings) },
        importSamples: timings,
        parts: partsOf(outputs.get(bundle.name)?.metafile as Metafile),
      });
    }
    return { bundles, esbuild: ESBUILD_OPTIONS, nodeOptions: NODE_OPTIONS };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Minified bytes per npm package (scoped packages by scope and name, so `@aws-sdk/client-dynamodb` and `@smithy/core`
 * stay apart; a nested copy counts as the package it is), and this repository's own files as one part, from esbuild's
 * metafile.
 */
export function partsOf(metafile: Metafile): BundlePart[] {
  const output = Object.values(metafile.outputs).find((candidate) => candidate.entryPoint !== undefined);
  const bytes = new Map<string, number>();
  for (const [input, { bytesInOutput }] of Object.entries(output?.inputs ?? {})) {
    // The innermost node_modules: a package's own copy of a dependency is that dependency, not the package.
    const name = [...input.matchAll(/node_modules\/((?:@[^/]+\/)?[^/]+)/g)].at(-1)?.[1] ?? 'this repository';
    bytes.set(name, (bytes.get(name) ?? 0) + bytesInOutput);
  }
  return [...bytes]
    .map(([name, size]) => ({ name, bytes: size }))
    .filter((part) => part.bytes > 0)
    .sort((a, b) => b.bytes - a.bytes);
}

async function importOnce(bundle: string, env: Record<string, string>): Promise<number> {
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', IMPORT_SCRIPT], {
    cwd: tmpdir(),
    env: {
      PATH: process.env.PATH ?? '',
      ...IMPORT_ENV,
      ...env,
      NODE_OPTIONS,
      BENCH_BUNDLE_URL: pathToFileURL(bundle).href,
    },
    timeout: 30_000,
  });
  return (JSON.parse(stdout) as { ms: number }).ms;
}
