import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { DescribeTableCommand, DescribeTimeToLiveCommand } from '@aws-sdk/client-dynamodb';
import { testDatabase } from '../support/dynamodb';

/**
 * The package as a team gets it. `npm run package` packs the workspace package (packages/keystone-idempotency: its
 * prepack compiles src/ into dist/), with its own package.json, README and LICENSE. It is unpacked into fresh projects in a temporary
 * directory, where `npm install` would put it, and each project is given, linked from this repository's
 * node_modules, the package's dependencies and, of its peers, exactly those the package README lists for what the
 * project imports: no network, no registry, and anything else fails to resolve. Then:
 *
 * - every entry point is imported, as an ES module and through `require`, in a project holding only the peers the
 *   README's table says it needs (and one without them fails, so the check can);
 * - every entry point's declarations compile in such a project (entry points whose rows list the same peers share
 *   one), under `strict` with `skipLibCheck: false`, on the lowest TypeScript the README states (installed from the
 *   registry into the temporary directory, once) and on this repository's; a small program per entry point then runs;
 * - a CommonJS project (`"type": "commonjs"`, `module: nodenext`) compiles its imports of the package to `require`
 *   and runs them: Node's `require()` of ES modules, the same module instances an `import` gets;
 * - a project with every peer typechecks a small program, every TypeScript block of the package README, the
 *   repository README and the migration guide, with `tsc` under `nodenext` (`skipLibCheck: false`) and under
 *   `bundler` resolution;
 * - the examples that touch AWS run as compiled: the README's `makeIdempotent` and middy handlers (the latter called
 *   from TypeScript with a plain Lambda `Context`), the table made from its SDK requests, and the migration guide's
 *   handler, against DynamoDB Local; the README's CDK stack is synthesized.
 *
 * Linking the peers rather than installing them from the registry proves as much for our declarations: the package
 * itself is a copy in each project, so what its files import resolves from that project's node_modules alone, and a
 * peer its row does not list is not there to be found.
 *
 * Three to five minutes on a shared two-core machine, most of it `tsc` checking the AWS SDK's and CDK's declarations
 * (skipLibCheck off) on two TypeScript versions; the rest the build and a CDK synth.
 */
jest.setTimeout(600_000);

const run = promisify(execFile);
const root = join(__dirname, '..', '..');
const tsc = require.resolve('typescript/bin/tsc');
const db = testDatabase();

interface Manifest {
  readonly name: string;
  readonly type?: string;
  readonly dependencies?: Record<string, string>;
  readonly peerDependencies?: Record<string, string>;
  readonly peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  readonly exports: Record<string, unknown>;
  readonly private?: boolean;
  readonly repository?: { url: string };
}

const packageRoot = join(root, 'packages', 'keystone-idempotency');
/** The library's package.json: the published manifest itself, nothing generated from it. */
const libraryManifest = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as Manifest;
/** The service's: private, the workspace root. */
const serviceManifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Manifest;
const docs = {
  package: readFileSync(join(root, 'packages', 'keystone-idempotency', 'README.md'), 'utf8'),
  repository: readFileSync(join(root, 'README.md'), 'utf8'),
  guide: readFileSync(join(root, 'docs', 'migrating-from-powertools.md'), 'utf8'),
};
const tsBlocks = (text: string) => [...text.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1] ?? '');
const blocks = {
  package: tsBlocks(docs.package),
  repository: tsBlocks(docs.repository),
  guide: tsBlocks(docs.guide),
};
/** The source file a block is written to in the consumer, and its compiled module. */
const blockFile = (doc: keyof typeof blocks, index: number) => `${doc}-${index + 1}`;
const blockWith = (doc: keyof typeof blocks, text: string) => {
  const index = blocks[doc].findIndex((block) => block.includes(text));
  if (index < 0) throw new Error(`no TypeScript block of ${doc} contains ${text}`);
  return blockFile(doc, index);
};

/** One row of the package README's entry point table: what to import, and the peers it says that needs. */
interface EntryRow {
  readonly entries: string[];
  readonly needs: string[];
  readonly onFirstUse: string[];
}

/** The rows of the table under "Entry points, and what each needs". */
function entryTable(readme: string): EntryRow[] {
  const section = readme.split('## Entry points, and what each needs')[1]?.split('\n## ')[0] ?? '';
  const names = (cell: string | undefined) => [...(cell ?? '').matchAll(/`([^`]+)`/g)].map((match) => match[1] ?? '');
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `keystone-idempotency'))
    .map((line) => {
      const [, target, , needs, onFirstUse] = line.split('|');
      const [entry = '', alias] = names(target);
      return {
        entries: alias ? [entry, `keystone-idempotency${alias}`] : [entry],
        needs: names(needs),
        // The first name of the cell is the package; the rest says what loads it.
        onFirstUse: names(onFirstUse).slice(0, 1),
      };
    });
}
const table = entryTable(docs.package);

let tmp: string;
let unpacked: string;
let packedFiles: string[];
let manifest: Manifest;
let consumer: string;
/** The TypeScript compilers the consumers are compiled with: this repository's, and the README's lowest. */
const typescripts = {
  current: { tsc, version: (require('typescript/package.json') as { version: string }).version },
  floor: { tsc: '', version: '' },
};
/** What `tsc` reported for the consumer under each resolution ('' when it compiled cleanly). */
const typechecked = { nodenext: '', bundler: '' };

/**
 * Builds the package and packs it into `destination`, as `npm run package` does: the tarball's path and the files in
 * it. The one place that knows where the published package is built from.
 */
async function packPackage(destination: string): Promise<{ tarball: string; files: string[] }> {
  // The workspace's prepack builds dist/ (emptied first, so nothing deleted or moved ships from an earlier build).
  const packed = await run(
    'npm',
    ['pack', '-w', 'keystone-idempotency', '--json', '--offline', '--pack-destination', destination],
    {
      cwd: root,
      maxBuffer: 16 * 1024 * 1024,
    },
  );
  const [result] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
  if (!result) throw new Error(`npm pack said nothing: ${packed.stderr}`);
  return { tarball: join(destination, result.filename), files: result.files.map((file) => file.path).sort() };
}

/**
 * The lowest TypeScript the package README states ("TypeScript 5.4 or newer"), installed from the registry into its
 * own folder of the temporary directory (never into this repository): its `tsc`, and the version it reports.
 */
async function floorTypeScript(): Promise<{ tsc: string; version: string }> {
  const floor = /TypeScript (\d+\.\d+) or newer/.exec(docs.package)?.[1];
  if (!floor) throw new Error('the package README states no lowest TypeScript ("TypeScript 5.x or newer")');
  const dir = join(tmp, `typescript-${floor}`);
  await mkdir(dir);
  await writeFile(join(dir, 'package.json'), JSON.stringify({ name: 'typescript-floor', private: true }));
  await run(
    'npm',
    ['install', `typescript@~${floor}.0`, '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'],
    { cwd: dir, maxBuffer: 16 * 1024 * 1024 },
  );
  const version = (
    JSON.parse(await readFile(join(dir, 'node_modules', 'typescript', 'package.json'), 'utf8')) as {
      version: string;
    }
  ).version;
  return { tsc: join(dir, 'node_modules', 'typescript', 'bin', 'tsc'), version };
}

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'keystone-pack-'));
  const [packed, floor] = await Promise.all([packPackage(tmp), floorTypeScript()]);
  typescripts.floor = floor;
  packedFiles = packed.files;
  unpacked = join(tmp, 'unpacked');
  await mkdir(unpacked);
  await run('tar', ['-xzf', packed.tarball, '-C', unpacked, '--strip-components=1']);
  manifest = JSON.parse(await readFile(join(unpacked, 'package.json'), 'utf8')) as Manifest;

  consumer = await project('consumer', [...Object.keys(manifest.peerDependencies ?? {}), '@types/node']);
  await writeConsumer(consumer);
  // nodenext also emits (out/), which the examples run from.
  typechecked.nodenext = await typecheck('tsconfig.nodenext.json');
  typechecked.bundler = await typecheck('tsconfig.bundler.json');
});
afterAll(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/**
 * A fresh project with the package installed (a copy: Node resolves a symlinked package's own imports from where it
 * really is) beside its dependencies and the given peers, linked from this repository's node_modules.
 */
async function project(
  name: string,
  peers: readonly string[],
  type: 'module' | 'commonjs' = 'module',
): Promise<string> {
  const dir = join(tmp, name);
  await mkdir(join(dir, 'node_modules'), { recursive: true });
  await cp(unpacked, join(dir, 'node_modules', manifest.name), { recursive: true });
  for (const dependency of [...Object.keys(manifest.dependencies ?? {}), ...peers]) {
    const link = join(dir, 'node_modules', dependency);
    await mkdir(dirname(link), { recursive: true });
    await symlink(join(root, 'node_modules', dependency), link, 'dir');
  }
  await writeFile(join(dir, 'package.json'), JSON.stringify({ name, private: true, type }));
  return dir;
}

/** Imports one entry point as an ES module and through `require`, in `dir`: its export names, or the error. */
async function load(dir: string, entry: string): Promise<{ esm: string[]; cjs: string[] }> {
  const esm = `console.log(JSON.stringify(Object.keys(await import(${JSON.stringify(entry)})).sort()));`;
  const cjs = `console.log(JSON.stringify(Object.keys(require(${JSON.stringify(entry)})).sort()));`;
  await writeFile(join(dir, 'load.mjs'), esm);
  await writeFile(join(dir, 'load.cjs'), cjs);
  const names = async (file: string) =>
    JSON.parse((await run(process.execPath, [file], { cwd: dir })).stdout) as string[];
  return { esm: await names('load.mjs'), cjs: await names('load.cjs') };
}

async function writeConsumer(dir: string): Promise<void> {
  const file = (path: string, text: string) =>
    mkdir(dirname(join(dir, path)), { recursive: true }).then(() => writeFile(join(dir, path), text));
  const compilerOptions = {
    target: 'es2022',
    lib: ['es2023', 'dom'],
    types: ['node'],
    strict: true,
    noUncheckedIndexedAccess: true,
    skipLibCheck: false,
    rootDir: 'src',
  };
  await file(
    'tsconfig.nodenext.json',
    JSON.stringify({ compilerOptions: { ...compilerOptions, module: 'nodenext', outDir: 'out' }, include: ['src'] }),
  );
  await file(
    'tsconfig.bundler.json',
    JSON.stringify({
      // The declarations are checked under nodenext (and per entry point, below); this is about resolution.
      compilerOptions: {
        ...compilerOptions,
        module: 'esnext',
        moduleResolution: 'bundler',
        noEmit: true,
        skipLibCheck: true,
      },
      include: ['src'],
    }),
  );
  await file('src/consumer.ts', CONSUMER);
  await file('src/doc-globals.d.ts', DOC_GLOBALS);
  for (const doc of ['package', 'repository', 'guide'] as const) {
    for (const [index, block] of blocks[doc].entries()) await file(`src/${blockFile(doc, index)}.ts`, block);
  }
  await file('src/call-middy-example.ts', callMiddyExample(blockWith('package', 'lambdaHandler(')));
  await file('src/call-guide-middy-example.ts', callMiddyExample(blockWith('guide', 'lambdaHandler(')));
  // What the CDK example's NodejsFunction looks for when it is built: its entry, and a lock file above it.
  await file('src/create-order.ts', 'export const handler = async () => ({ statusCode: 200 });\n');
  await file('package-lock.json', '{}\n');
}

/**
 * Uses each entry point the way an application does. `@ts-expect-error` lines make sure the declarations really
 * resolved: a type that silently became `any` (as extensionless imports in .d.ts files do under nodenext) would leave
 * them unused, which is an error.
 */
const CONSUMER = `import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { APIGatewayProxyEvent, SQSRecord } from 'aws-lambda';
import { App, Stack } from 'aws-cdk-lib';
import { type IdempotencyHandle, IDEMPOTENCY_DISABLED_ENV, LeaseLostError, makeIdempotent, ReplayCache } from 'keystone-idempotency';
import { IdempotencyTable } from 'keystone-idempotency/cdk';
import { compareAndSetEffect, DynamoDbStore, type EffectItem, IDEMPOTENCY_TABLE_ACTIONS, MAX_TRANSACTION_EFFECTS, putIfAbsent } from 'keystone-idempotency/dynamodb';
import { migrate, type PostgresEffect, PostgresStore } from 'keystone-idempotency/postgres';
import { Pool } from 'pg';
import { fingerprint, parseIdempotencyKey } from 'keystone-idempotency/engine';
import { accountIdOf, httpIdempotency, IdempotencyMetric, type WithIdempotency } from 'keystone-idempotency/http';
import { fromBody, makeSqsIdempotentHandler, type SqsQueueAccess, type SqsRecordContext } from 'keystone-idempotency/sqs';
import { SQSClient } from '@aws-sdk/client-sqs';
import { IdempotencyProblemType, RetrySafeClient } from 'keystone-idempotency/client';

const client = DynamoDBDocumentClient.from(new DynamoDBClient({}));
const store = new ReplayCache(new DynamoDbStore({ client, tableName: 'idempotency' }), { maxEntries: 100 });
// @ts-expect-error a store needs its table
new DynamoDbStore({ client });

const key: string = parseIdempotencyKey('order-42');
const print: string = fingerprint({ operation: 'POST /orders', body: '{}' });
const limit: 99 = MAX_TRANSACTION_EFFECTS;
export const switchedOffBy: 'KEYSTONE_IDEMPOTENCY_DISABLED' = IDEMPOTENCY_DISABLED_ENV;
export const claims: readonly string[] = IDEMPOTENCY_TABLE_ACTIONS.operations;

export const book = makeIdempotent(
  async (order: { orderId: string }, idempotency: IdempotencyHandle<EffectItem>) => ({ by: idempotency.downstreamKey, order }),
  { store, name: 'book', key: (order) => order.orderId, responseHook: (result) => ({ ...result, replay: true }) },
);
// @ts-expect-error the key is taken from the function's own input type
makeIdempotent(async (order: { orderId: string }) => order, { store, name: 'book', key: (order) => order.id });

export const middleware = httpIdempotency({ store, metrics: { addMetric: () => undefined } });
export const tenant: string | undefined = accountIdOf({} as APIGatewayProxyEvent);
export const counted: 'IdempotencyReplayed' = IdempotencyMetric.replayed;
export type Context = WithIdempotency<typeof store>;

export const consumer = makeSqsIdempotentHandler({
  store,
  name: 'orders',
  key: fromBody((order: { orderId: string }) => order.orderId),
  process: async (record: SQSRecord, context: SqsRecordContext<EffectItem>) => {
    context.stage(compareAndSetEffect({ TableName: 't', Key: { pk: record.messageId }, attribute: 's', expected: 1, next: 2 }));
    return context.attempt;
  },
});

// The adapter's declarations name no SQS type: an SQSClient is what its structural \`client\` takes.
export const queue: SqsQueueAccess = { client: new SQSClient({}), deadLetterUrl: 'https://sqs.local/dlq' };

export async function once(): Promise<string> {
  const result = await putIfAbsent(client, { TableName: 't', Item: { pk: key, print }, keyAttributes: ['pk'] });
  return result.kind;
}

const pool = new Pool({ pipeline: true });
export const pgStore = new ReplayCache(new PostgresStore({ pool, lockTimeoutMs: 500 }));
export const migrated: Promise<{ readonly applied: readonly number[] }> = migrate(pool);
export const sql: PostgresEffect = { text: 'DELETE FROM t WHERE id = $1 RETURNING 1', values: [key], expectRows: 1 };
// @ts-expect-error a store needs its pool
new PostgresStore({});

export const table = new IdempotencyTable(new Stack(new App(), 'Consumer'), 'Idempotency');
// @ts-expect-error the key schema is the engine's, not a prop
new IdempotencyTable(new Stack(new App(), 'Other'), 'Idempotency', { partitionKey: { name: 'id' } });

export const api = new RetrySafeClient({ baseUrl: 'http://127.0.0.1:3000', headers: { Authorization: 'Bearer sk_test' } });
export const order = api.prepare({ url: 'orders', body: { sku: 'book-42' }, parse: (body) => body as { id: string } });
export async function orderId(): Promise<string | undefined> {
  const result = await order.send();
  // @ts-expect-error a result is a union: the body is there only once the kind says success
  result.body;
  return result.kind === 'success' ? result.body.id : undefined;
}
export const inFlight: 'https://keystone-idempotency.dev/problems/request-in-flight' = IdempotencyProblemType.requestInFlight;
export const fenced = (error: unknown): number | undefined => (error instanceof LeaseLostError ? error.record?.attempt : limit);

/** False unless a declaration failed to resolve and degraded to \`any\` (which skipLibCheck would not report). */
type IsAny<T> = 0 extends 1 & T ? true : false;
export const resolved: IsAny<
  | IdempotencyHandle<EffectItem>
  | SqsRecordContext<EffectItem>
  | WithIdempotency<typeof store>
  | typeof middleware
  | typeof order
  | typeof table
  | typeof store
  | typeof pgStore
> = false;
`;

/**
 * The documents' examples call the application's own collaborators: declared here, as the application would define
 * them.
 */
const DOC_GLOBALS = `declare const carrier: {
  book(order: unknown, options: { idempotencyKey: string }): Promise<{ id: string }>;
};
declare const processor: {
  charge(
    order: { amount: number; currency: string },
    options: { idempotencyKey: string },
  ): Promise<{ id: string; amount: number }>;
};
declare const KEY: string;
declare const controller: AbortController;
`;

/** A test of the application's, calling the README's middy handler as Lambda does: with a plain Context, no cast. */
function callMiddyExample(module: string): string {
  return `import type { Context } from 'aws-lambda';
import type { HttpEvent, HttpResult } from 'keystone-idempotency/http';
import { handler } from './${module}.js';

const context: Context = {
  callbackWaitsForEmptyEventLoop: true,
  functionName: 'create-order',
  functionVersion: '$LATEST',
  invokedFunctionArn: 'arn:aws:lambda:local:000000000000:function:create-order',
  memoryLimitInMB: '256',
  awsRequestId: 'request-1',
  logGroupName: '/aws/lambda/create-order',
  logStreamName: 'local',
  getRemainingTimeInMillis: () => 10_000,
  done: () => undefined,
  fail: () => undefined,
  succeed: () => undefined,
};

export async function call(event: HttpEvent): Promise<HttpResult> {
  return handler(event, context);
}
`;
}

async function typecheck(config: string): Promise<string> {
  try {
    await run(process.execPath, [tsc, '-p', join(consumer, config)], { cwd: consumer, maxBuffer: 16 * 1024 * 1024 });
    return '';
  } catch (error) {
    return (error as { stdout?: string }).stdout || String(error);
  }
}

/** Runs a script in the consumer against DynamoDB Local, with the SDK pointed at it; its last line, as JSON. */
async function runInConsumer(script: string, env: Record<string, string> = {}): Promise<unknown> {
  await writeFile(join(consumer, 'run.mjs'), script);
  const { stdout } = await run(process.execPath, ['run.mjs'], {
    cwd: consumer,
    env: {
      PATH: process.env.PATH,
      // The SDK's own setting for a service's endpoint: the examples' `new DynamoDBClient({})` run as printed.
      AWS_ENDPOINT_URL_DYNAMODB: process.env.DYNAMODB_ENDPOINT,
      AWS_REGION: 'local',
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
      IDEMPOTENCY_TABLE: db.idempotencyTable,
      ORDERS_TABLE: db.paymentsTable,
      ...env,
    },
    maxBuffer: 16 * 1024 * 1024,
  });
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? 'null');
}

describe('the packed package', () => {
  it('ships the compiled library with its declarations, its package.json, README and LICENSE, and nothing else', () => {
    const folders = Object.values(manifest.exports).flatMap((target) =>
      typeof target === 'object' && target !== null
        ? [/^\.\/dist\/([a-z]+)\//.exec((target as { default: string }).default)?.[1] ?? '']
        : [],
    );
    const library = new RegExp(`^dist/(${[...new Set(folders)].join('|')})/([a-z-]+/)*[a-z-]+\\.(js|d\\.ts)$`);
    expect(packedFiles.filter((path) => !library.test(path))).toEqual(['LICENSE', 'README.md', 'package.json']);
    for (const folder of folders) {
      expect(packedFiles).toEqual(expect.arrayContaining([`dist/${folder}/index.js`, `dist/${folder}/index.d.ts`]));
    }
  });

  it('is publishable: its package.json as it is in the repository, every peer optional', async () => {
    expect(serviceManifest.private).toBe(true);
    expect(manifest.private).toBeUndefined();
    expect(manifest.type).toBe('module');
    expect(manifest).toEqual(libraryManifest);
    const peers = Object.keys(manifest.peerDependencies ?? {});
    expect(peers).toEqual(
      expect.arrayContaining(['@aws-sdk/client-dynamodb', '@middy/core', 'aws-cdk-lib', 'pg', 'zod']),
    );
    expect(peers.filter((peer) => manifest.peerDependenciesMeta?.[peer]?.optional !== true)).toEqual([]);
    expect(Object.keys(manifest.dependencies ?? {})).not.toContain('@middy/core');
    expect(Object.keys(manifest.dependencies ?? {})).not.toContain('pg');
    // The registry is not asked: --offline, and dist/ was just built.
    const { stdout, stderr } = await run(
      'npm',
      ['publish', '-w', 'keystone-idempotency', '--dry-run', '--offline', '--ignore-scripts'],
      {
        cwd: root,
        maxBuffer: 16 * 1024 * 1024,
      },
    );
    expect(`${stdout}${stderr}`).toContain('+ keystone-idempotency@');
  });

  it('ships its own README, with every link absolute', async () => {
    const readme = await readFile(join(unpacked, 'README.md'), 'utf8');
    expect(readme.startsWith('# keystone-idempotency\n')).toBe(true);
    expect(readme).not.toContain('## The two commands'); // not the repository's README
    const links = [...readme.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1] ?? '');
    expect(links.length).toBeGreaterThan(2);
    const base = /^git\+(https:\/\/github\.com\/[^/]+\/[^/.]+)\.git$/.exec(libraryManifest.repository?.url ?? '')?.[1];
    expect(base).toBeDefined();
    expect(links.filter((link) => !link.startsWith('https://') && !link.startsWith('#'))).toEqual([]);
    expect(links).toContain(`${base}/blob/main/docs/migrating-from-powertools.md`);
  });
});

describe('its peer dependencies, as the package README lists them', () => {
  it('has a row for every entry point, and names every peer, and only peers', () => {
    const subpaths = Object.keys(manifest.exports).filter((subpath) => subpath !== './package.json');
    const named = (subpath: string) => (subpath === '.' ? manifest.name : `${manifest.name}/${subpath.slice(2)}`);
    expect(table.flatMap((row) => row.entries).sort()).toEqual(subpaths.map(named).sort());
    const peers = Object.keys(manifest.peerDependencies ?? {});
    const listed = new Set(table.flatMap((row) => [...row.needs, ...row.onFirstUse]));
    expect([...listed].filter((name) => !peers.includes(name))).toEqual([]);
    expect(peers.filter((peer) => !listed.has(peer))).toEqual([]);
    // The declarations' own peers are listed where they are needed, marked as types only.
    const typesOnly = table.flatMap((row) => row.needs.filter((name) => name.startsWith('@types/')));
    expect(new Set(typesOnly)).toEqual(new Set(['@types/aws-lambda', '@types/pg']));
  });

  it('imports every entry point, as an ES module and through require, with only the peers its row needs', async () => {
    for (const [index, row] of table.entries()) {
      const dir = await project(`entry-${index}`, row.needs);
      for (const entry of row.entries) {
        const { esm, cjs } = await load(dir, entry).catch((error: { stderr?: string }) => {
          throw new Error(`${entry} with only ${JSON.stringify(row.needs)}: ${error.stderr ?? error}`);
        });
        expect({ entry, esm: esm.length > 0, cjs }).toEqual({ entry, esm: true, cjs: esm });
      }
    }
  });

  it('fails to import an entry point without the peers its row needs (so the check above can fail)', async () => {
    const dir = await project('no-peers', []);
    const error = await load(dir, 'keystone-idempotency/dynamodb').then(
      () => undefined,
      (failed: { stderr?: string }) => failed.stderr ?? '',
    );
    expect(error).toMatch(/Cannot find (package|module) '@aws-sdk\//);
  });

  it('exports what each entry point is for, one instance per module, and refuses deep imports', async () => {
    const names: Record<string, string[]> = {};
    for (const entry of table.flatMap((row) => row.entries)) names[entry] = (await load(consumer, entry)).esm;
    expect(names['keystone-idempotency']).toEqual(
      expect.arrayContaining(['makeIdempotent', 'ReplayCache', 'IDEMPOTENCY_DISABLED_ENV', 'runIdempotently']),
    );
    // Internals are not exported (the root's surface is what users call).
    expect(
      names['keystone-idempotency']?.filter((name) => /^(decide|leaseOf|claimOptions|randomIds)$/.test(name)),
    ).toEqual([]);
    expect(names['keystone-idempotency/dynamodb']).toEqual(
      expect.arrayContaining(['DynamoDbStore', 'idempotencyTableRequests', 'idempotencyTableResource', 'putIfAbsent']),
    );
    expect(names['keystone-idempotency/cdk']).toEqual(['IdempotencyTable', 'checkQueueWindow']);
    expect(names['keystone-idempotency/postgres']).toEqual(
      expect.arrayContaining(['PostgresStore', 'migrate', 'migrationSql', 'compareAndSet']),
    );
    expect(names['keystone-idempotency/redis']).toEqual(expect.arrayContaining(['RedisStore', 'RedisDriver']));
    expect(names['keystone-idempotency/http']).toEqual(expect.arrayContaining(['httpIdempotency', 'lambdaHandler']));
    expect(names['keystone-idempotency/sqs']).toEqual(expect.arrayContaining(['makeSqsIdempotentHandler', 'fromBody']));
    expect(names['keystone-idempotency/client']).toEqual(
      expect.arrayContaining(['RetrySafeClient', 'newIdempotencyKey']),
    );
    // A store of your own: the engine's protocol over a driver, and the suite that proves it.
    expect(names['keystone-idempotency/engine']).toEqual(expect.arrayContaining(['DriverStore']));
    expect(names['keystone-idempotency/testing']).toEqual(
      expect.arrayContaining(['describeStoreContract', 'describeProtocolModel', 'ManualClock', 'Delivery']),
    );
    // The package's client is the generic one: the reference service's payments client is not in it.
    expect(names['keystone-idempotency/client']?.filter((name) => /payment/i.test(name))).toEqual([]);

    await writeFile(
      join(consumer, 'instances.mjs'),
      `const same = (await import('keystone-idempotency')) === (await import('keystone-idempotency/engine'));
const cjs = (await import('node:module')).createRequire(import.meta.url)('keystone-idempotency/engine');
let deep = 'allowed';
try {
  await import('keystone-idempotency/engine/run.js');
} catch (error) {
  deep = error.code;
}
console.log(JSON.stringify({ same, sameThroughRequire: cjs.LeaseLostError === (await import('keystone-idempotency')).LeaseLostError, deep }));
`,
    );
    const { stdout } = await run(process.execPath, ['instances.mjs'], { cwd: consumer });
    expect(JSON.parse(stdout)).toEqual({ same: true, sameThroughRequire: true, deep: 'ERR_PACKAGE_PATH_NOT_EXPORTED' });
  });
});

/**
 * A small program per entry point, as a project using only that entry point writes it, and what it prints when run.
 * `@ts-expect-error` lines make sure the declarations resolved (a type that degraded to `any` leaves them unused,
 * which is an error). Entry points without a program here fail the test that compiles them.
 */
const ENTRY_EXAMPLES: Record<string, { readonly source: string; readonly prints: unknown }> = {
  'keystone-idempotency': {
    source: `import { fingerprint, IDEMPOTENCY_DISABLED_ENV, makeIdempotent, parseIdempotencyKey } from 'keystone-idempotency';
const key: string = parseIdempotencyKey('order-42');
const print: string = fingerprint({ operation: 'POST /orders', body: '{}' });
// Never called: the compiler's check, not the program's.
export function misuse(): void {
  // @ts-expect-error a key is text
  parseIdempotencyKey(42);
}
console.log(JSON.stringify({ key, print: print === fingerprint({ operation: 'POST /orders', body: '{}' }), off: IDEMPOTENCY_DISABLED_ENV, wraps: typeof makeIdempotent }));
`,
    prints: { key: 'order-42', print: true, off: 'KEYSTONE_IDEMPOTENCY_DISABLED', wraps: 'function' },
  },
  'keystone-idempotency/engine': {
    source: `import { LeaseLostError, parseIdempotencyKey, recoverDue, ReplayCache } from 'keystone-idempotency/engine';
import * as root from 'keystone-idempotency';
// Never called: the compiler's check, not the program's.
export function misuse(): void {
  // @ts-expect-error a key is text
  parseIdempotencyKey(42);
}
console.log(JSON.stringify({ same: root.LeaseLostError === LeaseLostError && root.ReplayCache === ReplayCache, recovers: typeof recoverDue }));
`,
    prints: { same: true, recovers: 'function' },
  },
  'keystone-idempotency/testing': {
    source: `import { DriverStore } from 'keystone-idempotency/engine';
import { describeProtocolModel, describeStoreContract, type TestFramework } from 'keystone-idempotency/testing';
// The suite registers its cases with the framework it is given: here one that only lists them.
const names: string[] = [];
const framework: TestFramework = {
  describe: (name, body) => {
    names.push(name);
    body();
  },
  it: (name) => {
    names.push(name);
  },
};
describeStoreContract<number>({
  name: 'a store to come',
  setup: () => ({
    store: () => {
      throw new Error('no case runs here');
    },
    effect: () => 1,
    blockedEffect: () => 0,
    rowsUnder: async () => 0,
    maxResponseBytes: 1024,
  }),
  framework,
});
// Registering the model test loads no fast-check (this project has none): only running it does.
describeProtocolModel({
  name: 'a store to come',
  setup: () => {
    throw new Error('not set up here');
  },
  framework: { describe: (name) => names.push(name), it: () => undefined },
});
// Never called: the compiler's check, not the program's.
export function misuse(): void {
  // @ts-expect-error a harness gives its store
  describeStoreContract({ name: 'incomplete', setup: () => ({ maxResponseBytes: 1 }) });
}
console.log(JSON.stringify({ suite: names[0], model: names.at(-1), cases: names.length > 30, engine: typeof DriverStore }));
`,
    prints: {
      suite: 'the store contract on a store to come',
      model: 'the idempotency protocol on a store to come',
      cases: true,
      engine: 'function',
    },
  },
  'keystone-idempotency/client': {
    source: `import { checkIdempotencyKey, newIdempotencyKey, RetrySafeClient } from 'keystone-idempotency/client';
const key: string = newIdempotencyKey();
const api = new RetrySafeClient({ baseUrl: 'http://127.0.0.1:9/' });
// Never called: the compiler's check, not the program's.
export function misuse(): void {
  // @ts-expect-error the base URL is a string or a URL
  new RetrySafeClient({ baseUrl: 9 });
}
console.log(JSON.stringify({ key: checkIdempotencyKey(key) === key, client: api instanceof RetrySafeClient }));
`,
    prints: { key: true, client: true },
  },
  'keystone-idempotency/dynamodb': {
    source: `import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { DynamoDbStore, IDEMPOTENCY_TABLE_ACTIONS, idempotencyTableRequests } from 'keystone-idempotency/dynamodb';
const client = DynamoDBDocumentClient.from(new DynamoDBClient({ region: 'local' }));
const store = new DynamoDbStore({ client, tableName: 'idempotency' });
// Never called: the compiler's check, not the program's.
export function misuse(): void {
  // @ts-expect-error a store needs its table
  new DynamoDbStore({ client });
}
const { createTable } = idempotencyTableRequests('idempotency');
console.log(JSON.stringify({ store: store instanceof DynamoDbStore, table: createTable.TableName, actions: IDEMPOTENCY_TABLE_ACTIONS.operations }));
`,
    prints: {
      store: true,
      table: 'idempotency',
      actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
    },
  },
  'keystone-idempotency/postgres': {
    source: `import { Pool } from 'pg';
import { migrationSql, type PostgresEffect, PostgresStore } from 'keystone-idempotency/postgres';
const pool = new Pool();
const store = new PostgresStore({ pool });
const effect: PostgresEffect = { text: 'UPDATE orders SET paid = true WHERE id = $1', values: ['ord_1'] };
// Never called: the compiler's check, not the program's.
export function misuse(): void {
  // @ts-expect-error a store needs its pool
  new PostgresStore({});
}
console.log(JSON.stringify({ store: store instanceof PostgresStore, creates: /CREATE TABLE/i.test(migrationSql()), effect: effect.values?.length }));
`,
    prints: { store: true, creates: true, effect: 1 },
  },
  'keystone-idempotency/redis': {
    source: `import { createClient } from '@redis/client';
import { type RedisEffect, RedisStore } from 'keystone-idempotency/redis';
const client = createClient({ url: 'redis://127.0.0.1:1' }); // never connected: nothing here sends a command
const store = new RedisStore({ client });
const effect: RedisEffect = { incrBy: store.effectKey('orders:count'), by: 1 };
// Never called: the compiler's check, not the program's.
export function misuse(): void {
  // @ts-expect-error a store needs its client
  new RedisStore({});
  // @ts-expect-error a Redis effect is a command, not a DynamoDB item
  const item: RedisEffect = { Put: { TableName: 'orders', Item: {} } };
  void item;
}
console.log(JSON.stringify({ store: store instanceof RedisStore, key: effect.incrBy, record: store.recordKey('k') }));
`,
    prints: { store: true, key: '{keystone-idempotency}:orders:count', record: '{keystone-idempotency}:record:k' },
  },
  'keystone-idempotency/cdk': {
    source: `import { App, Stack } from 'aws-cdk-lib';
import { Table } from 'aws-cdk-lib/aws-dynamodb';
import { IdempotencyTable } from 'keystone-idempotency/cdk';
const app = new App();
const table = new IdempotencyTable(new Stack(app, 'Orders'), 'Idempotency');
// Never called: the compiler's check, not the program's.
export function misuse(): void {
  // @ts-expect-error the key schema is the engine's, not a prop
  new IdempotencyTable(new Stack(app, 'Other'), 'Idempotency', { partitionKey: { name: 'id' } });
}
// The README's stack is synthesized with the documents' examples; here the construct is built, in a project of its own.
console.log(JSON.stringify({ path: table.node.path, table: table instanceof Table }));
`,
    prints: { path: 'Orders/Idempotency', table: true },
  },
  'keystone-idempotency/http': {
    source: `import middy from '@middy/core';
import type { APIGatewayProxyEvent, Context } from 'aws-lambda';
import { httpIdempotency, type HttpEvent, type HttpResult, problemErrorHandler } from 'keystone-idempotency/http';
const handler = middy<HttpEvent, HttpResult>()
  .use(problemErrorHandler())
  .handler(async (): Promise<HttpResult> => {
    throw new Error('not today');
  });
const event = { resource: '/orders', path: '/orders', httpMethod: 'POST', headers: {}, body: null, isBase64Encoded: false, requestContext: {} } as APIGatewayProxyEvent;
const result = await handler(event, {} as Context);
// Never called: the compiler's check, not the program's.
export function misuse(): void {
  // @ts-expect-error the middleware needs a store
  httpIdempotency({});
}
console.log(JSON.stringify({ status: result.statusCode, wraps: typeof httpIdempotency }));
`,
    prints: { status: 500, wraps: 'function' },
  },
  'keystone-idempotency/durable': {
    source: `import type { DurableContext } from '@aws/durable-execution-sdk-js';
import { type DurableExecutions, type DurableRequest, executionName, idempotentStep } from 'keystone-idempotency/durable';
// Any start and describe will do (lambdaDurableExecutions makes them on Lambda).
const executions: DurableExecutions = {
  start: async ({ name }) => ({ executionArn: \`arn:local:\${name}\` }),
  describe: async () => ({ status: 'RUNNING', input: undefined }),
};
export const step = (context: DurableContext, request: DurableRequest<{ id: string }>) =>
  idempotentStep(context, \`record-\${request.input.id}\`, async (handle) => handle.downstreamKey, {
    store: undefined as never,
  });
console.log(JSON.stringify({ name: executionName('acct|POST /approvals|k').length, start: typeof executions.start }));
`,
    prints: { name: 46, start: 'function' },
  },
  'keystone-idempotency/sqs': {
    source: `import type { SQSRecord } from 'aws-lambda';
import { makeSqsIdempotentHandler, queueUrlOf, type SqsQueueAccess } from 'keystone-idempotency/sqs';
// Any client with an SQSClient's send will do: no @aws-sdk/client-sqs is installed here.
const queue: SqsQueueAccess = { client: { send: async () => ({}) } };
// Never called: the compiler's check, not the program's.
export function misuse(): void {
  // @ts-expect-error queue access needs a client
  const none: SqsQueueAccess = { url: 'https://sqs.local/orders' };
}
export const records = (record: SQSRecord): string => record.messageId;
console.log(JSON.stringify({ url: queueUrlOf('arn:aws:sqs:eu-west-1:123456789012:orders'), queue: typeof queue.client.send, handler: typeof makeSqsIdempotentHandler }));
`,
    prints: {
      url: 'https://sqs.eu-west-1.amazonaws.com/123456789012/orders',
      queue: 'function',
      handler: 'function',
    },
  },
};

/** An entry point's file name in a consumer: `keystone-idempotency/http` is http.ts, the root is index.ts. */
const exampleFile = (entry: string) => (entry.includes('/') ? entry.slice(entry.indexOf('/') + 1) : 'index');

/**
 * Compiles a consumer with a TypeScript: '' when it compiled cleanly, else what tsc reported. Only one of them
 * emits (out/), so two versions can compile the same consumer at the same time.
 */
async function compile(dir: string, compiler: string, emit: boolean): Promise<string> {
  const args = [compiler, '-p', join(dir, 'tsconfig.json'), ...(emit ? [] : ['--noEmit'])];
  try {
    await run(process.execPath, args, { cwd: dir, maxBuffer: 16 * 1024 * 1024 });
    return '';
  } catch (error) {
    return (error as { stdout?: string }).stdout || String(error);
  }
}

/** A consumer's tsconfig: `strict`, `skipLibCheck: false`, nodenext; `types` only what the project itself lists. */
function consumerTsconfig(options: { types: string[]; lib: string[] }): string {
  return JSON.stringify({
    compilerOptions: {
      target: 'es2022',
      module: 'nodenext',
      lib: options.lib,
      types: options.types,
      strict: true,
      skipLibCheck: false,
      rootDir: 'src',
      outDir: 'out',
    },
    include: ['src'],
  });
}

describe('each entry point, in a project with only the peers its row lists', () => {
  /** The table's rows, grouped by the peers they list: one project per group. */
  const groups: { entries: string[]; needs: string[] }[] = [];
  for (const row of table) {
    const same = groups.find((group) => [...group.needs].sort().join() === [...row.needs].sort().join());
    if (same) same.entries.push(...row.entries);
    else groups.push({ entries: [...row.entries], needs: row.needs });
  }

  it('has a program for every entry point', () => {
    expect(table.flatMap((row) => row.entries).filter((entry) => ENTRY_EXAMPLES[entry] === undefined)).toEqual([]);
  });

  it.each(groups.map((group) => [group.entries.join(', '), group] as const))(
    '%s: the declarations compile (strict, skipLibCheck: false) on the lowest TypeScript and the current one, and run',
    async (_name, { entries, needs }) => {
      const name = `types-${entries.map(exampleFile).join('-')}`;
      // Projects needing no peer stand for browsers too: no @types/node, the DOM's globals instead.
      const browser = needs.length === 0;
      const dir = await project(name, browser ? needs : [...needs, '@types/node']);
      await mkdir(join(dir, 'src'));
      for (const entry of entries) {
        await writeFile(join(dir, 'src', `${exampleFile(entry)}.ts`), ENTRY_EXAMPLES[entry]?.source ?? '');
      }
      const types = needs.filter((peer) => peer.startsWith('@types/')).map((peer) => peer.slice('@types/'.length));
      await writeFile(
        join(dir, 'tsconfig.json'),
        consumerTsconfig(browser ? { types, lib: ['es2023', 'dom'] } : { types: [...types, 'node'], lib: ['es2023'] }),
      );
      const [current, floor] = await Promise.all([
        compile(dir, typescripts.current.tsc, true),
        compile(dir, typescripts.floor.tsc, false),
      ]);
      expect({ typescript: typescripts.current.version, errors: current }).toEqual({
        typescript: typescripts.current.version,
        errors: '',
      });
      if (needs.includes('pg')) {
        // The README's one exception: pg's own declarations (pg-protocol) need TypeScript 5.7 with skipLibCheck off.
        const errors = floor.split('\n').filter((line) => /error TS/.test(line));
        expect(errors.filter((line) => !line.includes('/node_modules/pg-protocol/'))).toEqual([]);
      } else {
        expect({ typescript: typescripts.floor.version, errors: floor }).toEqual({
          typescript: typescripts.floor.version,
          errors: '',
        });
      }
      for (const entry of entries) {
        const { stdout } = await run(process.execPath, [join('out', `${exampleFile(entry)}.js`)], { cwd: dir });
        expect({ entry, prints: JSON.parse(stdout.trim().split('\n').at(-1) ?? 'null') }).toEqual({
          entry,
          prints: ENTRY_EXAMPLES[entry]?.prints,
        });
      }
    },
  );

  it('fails to compile an entry point whose peers are not installed (so the checks above can fail)', async () => {
    const dir = await project('types-missing-peers', ['@types/node']);
    await mkdir(join(dir, 'src'));
    await writeFile(join(dir, 'src', 'index.ts'), ENTRY_EXAMPLES['keystone-idempotency/cdk']?.source ?? '');
    await writeFile(join(dir, 'tsconfig.json'), consumerTsconfig({ types: ['node'], lib: ['es2023'] }));
    expect(await compile(dir, typescripts.current.tsc, false)).toMatch(
      /node_modules\/keystone-idempotency\/dist\/cdk\/[a-z-]+\.d\.ts\(\d+,\d+\): error TS2307: Cannot find module 'aws-cdk-lib/,
    );
  });

  it('compiles and runs a CommonJS project: require() of the ES modules, the same instances an import gets', async () => {
    const dynamodb = table.find((row) => row.entries.includes('keystone-idempotency/dynamodb'));
    const dir = await project('commonjs', [...(dynamodb?.needs ?? []), '@types/node'], 'commonjs');
    await mkdir(join(dir, 'src'));
    await writeFile(
      join(dir, 'src', 'index.ts'),
      `import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { fingerprint, LeaseLostError } from 'keystone-idempotency';
import { DynamoDbStore } from 'keystone-idempotency/dynamodb';

const store = new DynamoDbStore({ client: DynamoDBDocumentClient.from(new DynamoDBClient({ region: 'local' })), tableName: 'idempotency' });
// Never called: the compiler's check, not the program's.
export function misuse(): void {
  // @ts-expect-error a store needs its table
  new DynamoDbStore({ client: DynamoDBDocumentClient.from(new DynamoDBClient({})) });
}

async function main(): Promise<void> {
  const imported = await import('keystone-idempotency');
  console.log(JSON.stringify({
    commonjs: typeof module === 'object' && typeof require === 'function',
    sameClass: imported.LeaseLostError === LeaseLostError,
    store: store instanceof DynamoDbStore,
    fingerprint: typeof fingerprint({ operation: 'POST /orders', body: '{}' }),
  }));
}
void main();
`,
    );
    await writeFile(join(dir, 'tsconfig.json'), consumerTsconfig({ types: ['node'], lib: ['es2023'] }));
    const [current, floor] = await Promise.all([
      compile(dir, typescripts.current.tsc, true),
      compile(dir, typescripts.floor.tsc, false),
    ]);
    expect(current).toBe('');
    // The README says why a CommonJS file needs TypeScript 5.8: earlier versions refuse a require of an ES module.
    expect(floor).toContain('error TS1479');
    const compiled = await readFile(join(dir, 'out', 'index.js'), 'utf8');
    expect(compiled).toContain('require("keystone-idempotency")');
    expect(compiled).toContain('require("keystone-idempotency/dynamodb")');
    const { stdout, stderr } = await run(process.execPath, [join('out', 'index.js')], { cwd: dir });
    expect(JSON.parse(stdout)).toEqual({ commonjs: true, sameClass: true, store: true, fingerprint: 'string' });
    // Node 20.19+ and 22.12+ load ES modules through require() without a flag, and without an experimental warning.
    expect(stderr).toBe('');
  });
});

describe('the documents’ examples, against the packed package', () => {
  it('typecheck, with a consumer using every entry point, under nodenext resolution', () => {
    expect(blocks.package.length).toBeGreaterThanOrEqual(7);
    expect(blocks.guide.length).toBeGreaterThanOrEqual(4);
    expect(typechecked.nodenext).toBe('');
  });

  it('typecheck under bundler resolution (esbuild, CDK) too', () => {
    expect(typechecked.bundler).toBe('');
  });

  it("run the README's makeIdempotent example: one booking for a redelivered event", async () => {
    const orderId = `ord_${Date.now()}`;
    const result = (await runInConsumer(`const booked = [];
globalThis.carrier = {
  async book(order, { idempotencyKey }) {
    booked.push(idempotencyKey);
    return { id: 'shp_' + booked.length };
  },
};
const { handler } = await import('./out/${blockWith('package', 'makeIdempotent(')}.js');
const event = { id: 'evt_1', 'detail-type': 'OrderPlaced', detail: { orderId: ${JSON.stringify(orderId)}, items: ['book'] } };
const first = await handler(event, {});
const again = await handler({ ...event, id: 'evt_2' }, {});
console.log(JSON.stringify({ first, again, booked }));
`)) as { first: unknown; again: unknown; booked: string[] };
    expect(result.first).toEqual({ shipmentId: 'shp_1' });
    expect(result.again).toEqual(result.first);
    expect(result.booked).toHaveLength(1);
    expect(result.booked[0]).toMatch(/^idk_/);
    expect(await db.itemsUnder(`ORDER#${orderId}`)).toBe(1);
  });

  it("make the table from the README's SDK requests: the key, the recovery index and TTL", async () => {
    const tableName = `readme-${Date.now()}`;
    await runInConsumer(
      `await import('./out/${blockWith('package', 'idempotencyTableRequests(')}.js');\nconsole.log('null');\n`,
      { IDEMPOTENCY_TABLE: tableName },
    );
    const { Table } = await db.client.send(new DescribeTableCommand({ TableName: tableName }));
    expect(Table?.KeySchema).toEqual([{ AttributeName: 'pk', KeyType: 'HASH' }]);
    expect(Table?.GlobalSecondaryIndexes?.map((index) => index.IndexName)).toEqual(['recovery']);
    const ttl = await db.client.send(new DescribeTimeToLiveCommand({ TableName: tableName }));
    expect(ttl.TimeToLiveDescription?.AttributeName).toBe('expiresAt');
  });

  it("call the README's middy handler from TypeScript with a plain Context: one charge, then its replay", async () => {
    const result = (await runInConsumer(`const charged = [];
globalThis.processor = {
  async charge(order, { idempotencyKey }) {
    charged.push(idempotencyKey);
    return { id: 'ch_' + charged.length, amount: order.amount };
  },
};
const { call } = await import('./out/call-middy-example.js');
const event = (body) => ({
  resource: '/orders', path: '/orders', httpMethod: 'POST', body, isBase64Encoded: false,
  headers: { 'Content-Type': 'application/json', 'Idempotency-Key': 'order-${Date.now()}' },
  multiValueHeaders: {}, queryStringParameters: null, multiValueQueryStringParameters: null,
  pathParameters: null, stageVariables: null,
  requestContext: { authorizer: { accountId: 'acct_readme' } },
});
const first = await call(event('{"amount":4200,"currency":"usd"}'));
const again = await call(event('{"currency":"usd","amount":4200}'));
const invalid = await call(event('{"amount":-1,"currency":"usd"}'));
console.log(JSON.stringify({ first, again, invalid, charged }));
`)) as Record<'first' | 'again' | 'invalid', { statusCode: number; body: string; headers?: Record<string, string> }> & {
      charged: string[];
    };
    expect(result.first.statusCode).toBe(201);
    expect(result.again).toMatchObject({ statusCode: 201, body: result.first.body });
    expect(result.again.headers?.['Idempotent-Replayed']).toBe('true');
    expect(result.charged).toHaveLength(1);
    // validateJsonBody loaded zod (a zod/mini schema) on its first use, from the packed package.
    expect(result.invalid.statusCode).toBe(400);
    expect(JSON.parse(result.invalid.body).errors).toEqual([{ path: 'amount', message: expect.any(String) }]);
  });

  it("run the migration guide's HTTP handler: a body that is not JSON is a 400 problem+json, never a 500", async () => {
    const result = (await runInConsumer(`const charged = [];
globalThis.processor = {
  async charge(order, { idempotencyKey }) {
    charged.push(idempotencyKey);
    return { id: 'ch_' + charged.length, amount: order.amount };
  },
};
const { call } = await import('./out/call-guide-middy-example.js');
const key = 'guide-order-${Date.now()}';
const event = (body) => ({
  resource: '/orders', path: '/orders', httpMethod: 'POST', body, isBase64Encoded: false,
  headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key },
  multiValueHeaders: {}, queryStringParameters: null, multiValueQueryStringParameters: null,
  pathParameters: null, stageVariables: null,
  requestContext: { authorizer: { accountId: 'acct_guide' } },
});
const notJson = await call(event('amount=4200&currency=usd'));
const first = await call(event('{"amount":4200,"currency":"usd"}'));
console.log(JSON.stringify({ notJson, first, charged }));
`)) as Record<'notJson' | 'first', { statusCode: number; body: string; headers?: Record<string, string> }> & {
      charged: string[];
    };
    expect(result.notJson.statusCode).toBe(400);
    expect(result.notJson.headers?.['Content-Type']).toBe('application/problem+json');
    expect(JSON.parse(result.notJson.body)).toMatchObject({ status: 400, detail: 'The body is not valid JSON.' });
    // Refused before the claim: the same key then runs the corrected request, once.
    expect(result.first.statusCode).toBe(201);
    expect(result.first.headers?.['X-Original-Attempt']).toBeUndefined();
    expect(result.charged).toHaveLength(1);
  });

  it("synthesize the README's CDK stack: the table as idempotencyTableResource() describes it, and the grant", async () => {
    const result = (await runInConsumer(`const { App } = await import('aws-cdk-lib');
const { Template } = await import('aws-cdk-lib/assertions');
const { idempotencyTableResource } = await import('keystone-idempotency/dynamodb');
const { OrdersStack } = await import('./out/${blockWith('package', 'class OrdersStack')}.js');
const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
const template = Template.fromStack(new OrdersStack(app, 'Orders'));
const tables = Object.values(template.findResources('AWS::DynamoDB::Table'));
const actions = Object.values(template.findResources('AWS::IAM::Policy'))
  .flatMap((policy) => policy.Properties.PolicyDocument.Statement)
  .map((statement) => statement.Action);
console.log(JSON.stringify({ tables, expected: idempotencyTableResource(), actions }));
`)) as { tables: unknown[]; expected: unknown; actions: unknown[] };
    expect(result.tables).toEqual([result.expected]);
    expect(result.actions).toContainEqual(['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem']);
  });

  it("run the migration guide's makeIdempotent handler: the cache, the fingerprint and the response hook", async () => {
    const orderId = `ord_guide_${Date.now()}`;
    const result = (await runInConsumer(`const booked = [];
globalThis.carrier = {
  async book(order, { idempotencyKey }) {
    booked.push(idempotencyKey);
    return { id: 'shp_' + booked.length };
  },
};
const { handler } = await import('./out/${blockWith('guide', 'ReplayCache(')}.js');
const { place } = await import('./out/${blockWith('guide', 'instanceof KeyReusedError')}.js');
const event = (items) => ({ 'detail-type': 'OrderPlaced', detail: { orderId: ${JSON.stringify(orderId)}, items } });
const first = await handler(event(['book']));
const again = await handler(event(['book']));
const other = await place(handler, event(['lamp']));
console.log(JSON.stringify({ first, again, other, booked }));
`)) as { first: unknown; again: unknown; other: string; booked: string[] };
    expect(result.first).toEqual({ shipmentId: 'shp_1', replayed: false });
    expect(result.again).toEqual({ shipmentId: 'shp_1', replayed: true });
    expect(result.other).toBe('the order id came back with other items');
    expect(result.booked).toHaveLength(1);
    expect(await db.itemsUnder(`ORDER#${orderId}`)).toBe(1);
  });
});
