import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { testDatabase } from '../support/dynamodb';

/**
 * The package as a team gets it. `npm pack` (which builds dist/ through `prepack`) makes the tarball; it is unpacked
 * into a fresh project in a temporary directory, where `npm install` would put it, and what it declares it needs
 * (its dependencies and peer dependencies, and nothing else) is linked from this repository's node_modules: no
 * network, no registry, and an undeclared dependency fails to resolve. The consumer then:
 *
 * - imports every entry point, as an ES module and through `require`, and is refused a deep import;
 * - typechecks a small program using each entry point, and every TypeScript block of the README, with `tsc` under
 *   `nodenext` and under `bundler` resolution, against the published declarations;
 * - runs the README's `makeIdempotent` example, as compiled, against DynamoDB Local.
 *
 * About 11 s on a quiet machine, 40 to 50 s on a loaded one (the build, and two `tsc` runs over the AWS SDK's
 * declarations).
 */
jest.setTimeout(300_000);

const run = promisify(execFile);
const root = join(__dirname, '..', '..');
const tsc = require.resolve('typescript/bin/tsc');
const db = testDatabase();

const ENTRY_POINTS = [
  'keystone-idempotency',
  'keystone-idempotency/engine',
  'keystone-idempotency/http',
  'keystone-idempotency/sqs',
  'keystone-idempotency/natural',
  'keystone-idempotency/dynamodb',
  'keystone-idempotency/postgres',
  'keystone-idempotency/client',
];

interface PackedFile {
  readonly path: string;
}
interface Manifest {
  readonly dependencies?: Record<string, string>;
  readonly peerDependencies?: Record<string, string>;
  readonly exports: Record<string, unknown>;
  readonly private?: boolean;
}

let tmp: string;
let project: string;
let packedFiles: string[];
let manifest: Manifest;
/** What `tsc` reported for the consumer under each resolution ('' when it compiled cleanly). */
const typechecked = { nodenext: '', bundler: '' };
const readmeBlocks = [...readFileSync(join(root, 'README.md'), 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map(
  (match) => match[1] ?? '',
);

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'keystone-pack-'));
  const packed = await run('npm', ['pack', '--json', '--offline', '--pack-destination', tmp], {
    cwd: root,
    maxBuffer: 16 * 1024 * 1024,
  });
  const [result] = JSON.parse(packed.stdout) as { filename: string; files: PackedFile[] }[];
  if (!result) throw new Error(`npm pack said nothing: ${packed.stderr}`);
  packedFiles = result.files.map((file) => file.path).sort();

  project = join(tmp, 'consumer');
  const installed = join(project, 'node_modules', 'keystone-idempotency');
  await mkdir(installed, { recursive: true });
  await run('tar', ['-xzf', join(tmp, result.filename), '-C', installed, '--strip-components=1']);
  manifest = JSON.parse(await readFile(join(installed, 'package.json'), 'utf8')) as Manifest;

  // What npm would install beside it: exactly what it declares, plus the consumer's own type packages.
  const provided = [
    ...Object.keys(manifest.dependencies ?? {}),
    ...Object.keys(manifest.peerDependencies ?? {}),
    '@types/node',
  ];
  for (const name of provided) {
    const link = join(project, 'node_modules', name);
    await mkdir(dirname(link), { recursive: true });
    await symlink(join(root, 'node_modules', name), link, 'dir');
  }
  await writeConsumer();
  // nodenext also emits (out/), which the example test runs.
  typechecked.nodenext = await typecheck('tsconfig.nodenext.json');
  typechecked.bundler = await typecheck('tsconfig.bundler.json');
});
afterAll(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

async function writeConsumer(): Promise<void> {
  const file = (path: string, text: string) =>
    mkdir(dirname(join(project, path)), { recursive: true }).then(() => writeFile(join(project, path), text));
  await file('package.json', JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  const compilerOptions = {
    target: 'es2022',
    lib: ['es2023', 'dom'],
    types: ['node'],
    strict: true,
    noUncheckedIndexedAccess: true,
    skipLibCheck: true,
    rootDir: 'src',
  };
  await file(
    'tsconfig.nodenext.json',
    JSON.stringify({ compilerOptions: { ...compilerOptions, module: 'nodenext', outDir: 'out' }, include: ['src'] }),
  );
  await file(
    'tsconfig.bundler.json',
    JSON.stringify({
      compilerOptions: { ...compilerOptions, module: 'esnext', moduleResolution: 'bundler', noEmit: true },
      include: ['src'],
    }),
  );
  await file('src/consumer.ts', CONSUMER);
  await file('src/readme-globals.d.ts', README_GLOBALS);
  for (const [index, block] of readmeBlocks.entries()) await file(`src/readme-${index + 1}.ts`, block);
  await file('imports.mjs', IMPORTS);
  await file('require.cjs', REQUIRES);
}

/**
 * Uses each entry point the way an application does. `@ts-expect-error` lines make sure the declarations really
 * resolved: a type that silently became `any` (as extensionless imports in .d.ts files do under nodenext) would leave
 * them unused, which is an error.
 */
const CONSUMER = `import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { APIGatewayProxyEvent, SQSRecord } from 'aws-lambda';
import { type IdempotencyHandle, LeaseLostError, makeIdempotent } from 'keystone-idempotency';
import { DynamoDbStore, type EffectItem, MAX_TRANSACTION_EFFECTS } from 'keystone-idempotency/dynamodb';
import { migrate, type PostgresEffect, PostgresStore } from 'keystone-idempotency/postgres';
import { Pool } from 'pg';
import { fingerprint, parseIdempotencyKey } from 'keystone-idempotency/engine';
import { accountIdOf, httpIdempotency, IdempotencyMetric, type WithIdempotency } from 'keystone-idempotency/http';
import { makeSqsIdempotentHandler, type SqsRecordContext } from 'keystone-idempotency/sqs';
import { compareAndSetItem, putIfAbsent } from 'keystone-idempotency/natural';
import { IdempotencyProblemType, RetrySafeClient } from 'keystone-idempotency/client';

const client = DynamoDBDocumentClient.from(new DynamoDBClient({}));
const store = new DynamoDbStore({ client, tableName: 'idempotency' });
// @ts-expect-error a store needs its table
new DynamoDbStore({ client });

const key: string = parseIdempotencyKey('order-42');
const print: string = fingerprint({ operation: 'POST /orders', body: '{}' });
const limit: 99 = MAX_TRANSACTION_EFFECTS;

export const book = makeIdempotent(
  async (order: { orderId: string }, idempotency: IdempotencyHandle<EffectItem>) => ({ by: idempotency.downstreamKey, order }),
  { store, name: 'book', key: (order) => order.orderId },
);
// @ts-expect-error the key is taken from the function's own input type
makeIdempotent(async (order: { orderId: string }) => order, { store, name: 'book', key: (order) => order.id });

export const middleware = httpIdempotency({ store, metrics: { addMetric: () => undefined } });
export const tenant: string | undefined = accountIdOf({} as APIGatewayProxyEvent);
export const counted: 'IdempotencyReplayed' = IdempotencyMetric.replayed;
export type Context = WithIdempotency<EffectItem>;

export const consumer = makeSqsIdempotentHandler({
  store,
  name: 'orders',
  process: async (record: SQSRecord, context: SqsRecordContext<EffectItem>) => {
    context.stage(compareAndSetItem({ TableName: 't', Key: { pk: record.messageId }, attribute: 's', expected: 1, next: 2 }));
    return context.attempt;
  },
});

export async function once(): Promise<string> {
  const result = await putIfAbsent(client, { TableName: 't', Item: { pk: key, print }, keyAttributes: ['pk'] });
  return result.kind;
}

const pool = new Pool({ pipeline: true });
export const pgStore = new PostgresStore({ pool, lockTimeoutMs: 500 });
export const migrated: Promise<{ readonly applied: readonly number[] }> = migrate(pool);
export const sql: PostgresEffect = { text: 'DELETE FROM t WHERE id = $1 RETURNING 1', values: [key], expectRows: 1 };
// @ts-expect-error a store needs its pool
new PostgresStore({});

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
  IdempotencyHandle<EffectItem> | SqsRecordContext<EffectItem> | WithIdempotency<EffectItem> | typeof middleware | typeof order | PostgresStore
> = false;
`;

/**
 * The README's examples call the application's own collaborators: declared here, as the application would define
 * them.
 */
const README_GLOBALS = `declare const carrier: {
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

const IMPORTS = `const names = {};
for (const entry of ${JSON.stringify(ENTRY_POINTS)}) names[entry] = Object.keys(await import(entry)).sort();
const same = (await import('keystone-idempotency')) === (await import('keystone-idempotency/engine'));
let deep = 'allowed';
try {
  await import('keystone-idempotency/dist/engine/store.js');
} catch (error) {
  deep = error.code;
}
console.log(JSON.stringify({ names, same, deep }));
`;

const REQUIRES = `const names = {};
for (const entry of ${JSON.stringify(ENTRY_POINTS)}) names[entry] = Object.keys(require(entry)).sort();
import('keystone-idempotency/engine').then((imported) => {
  const same = require('keystone-idempotency/engine').LeaseLostError === imported.LeaseLostError;
  console.log(JSON.stringify({ names, same }));
});
`;

async function typecheck(config: string): Promise<string> {
  try {
    await run(process.execPath, [tsc, '-p', join(project, config)], { cwd: project, maxBuffer: 16 * 1024 * 1024 });
    return '';
  } catch (error) {
    return (error as { stdout?: string }).stdout || String(error);
  }
}

describe('the packed package', () => {
  it('ships the compiled library, its declarations and the README, and nothing else', () => {
    const outside = packedFiles.filter(
      (path) => !/^dist\/(engine|dynamodb|postgres|http|sqs|natural|client)\/[a-z-]+\.(js|d\.ts)$/.test(path),
    );
    expect(outside).toEqual(['LICENSE', 'README.md', 'dist/package.json', 'package.json']);
    for (const entry of ['engine', 'dynamodb', 'postgres', 'http', 'sqs', 'natural', 'client']) {
      expect(packedFiles).toEqual(expect.arrayContaining([`dist/${entry}/index.js`, `dist/${entry}/index.d.ts`]));
    }
  });

  it('is publishable, with its entry points, and the AWS SDK and middy as peers', async () => {
    expect(manifest.private).toBeUndefined();
    expect(Object.keys(manifest.exports)).toEqual([
      '.',
      './engine',
      './dynamodb',
      './postgres',
      './http',
      './sqs',
      './natural',
      './client',
      './package.json',
    ]);
    expect(Object.keys(manifest.peerDependencies ?? {})).toEqual(
      expect.arrayContaining(['@aws-sdk/client-dynamodb', '@aws-sdk/lib-dynamodb', '@middy/core', 'pg']),
    );
    expect(Object.keys(manifest.dependencies ?? {})).not.toContain('pg');
    expect(Object.keys(manifest.dependencies ?? {})).not.toContain('@middy/core');
    // The registry is not asked: --offline, and dist/ was just built by pack (no second prepack).
    const { stdout, stderr } = await run('npm', ['publish', '--dry-run', '--offline', '--ignore-scripts'], {
      cwd: root,
      maxBuffer: 16 * 1024 * 1024,
    });
    expect(`${stdout}${stderr}`).toContain('+ keystone-idempotency@');
  });

  it('imports every entry point as an ES module, one instance per module, and refuses deep imports', async () => {
    const { stdout } = await run(process.execPath, ['imports.mjs'], { cwd: project });
    const { names, same, deep } = JSON.parse(stdout) as {
      names: Record<string, string[]>;
      same: boolean;
      deep: string;
    };
    expect(names['keystone-idempotency']).toEqual(expect.arrayContaining(['makeIdempotent', 'runIdempotently']));
    expect(names['keystone-idempotency/dynamodb']).toEqual(expect.arrayContaining(['DynamoDbStore', 'RECOVERY_INDEX']));
    expect(names['keystone-idempotency/postgres']).toEqual(
      expect.arrayContaining(['PostgresStore', 'migrate', 'migrationSql', 'compareAndSet']),
    );
    expect(names['keystone-idempotency/http']).toEqual(expect.arrayContaining(['httpIdempotency', 'answersEarly']));
    expect(names['keystone-idempotency/sqs']).toContain('makeSqsIdempotentHandler');
    expect(names['keystone-idempotency/natural']).toEqual(expect.arrayContaining(['putIfAbsent', 'upsert']));
    expect(names['keystone-idempotency/client']).toEqual(
      expect.arrayContaining(['RetrySafeClient', 'IdempotencyProblemType', 'newIdempotencyKey']),
    );
    // The package's client is the generic one: the reference service's payments client is not in it.
    expect(names['keystone-idempotency/client']?.filter((name) => /payment/i.test(name))).toEqual([]);
    expect(same).toBe(true);
    expect(deep).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED');
  });

  it('loads through require too (CommonJS), as the same modules', async () => {
    const { stdout } = await run(process.execPath, ['require.cjs'], { cwd: project });
    const { names, same } = JSON.parse(stdout) as { names: Record<string, string[]>; same: boolean };
    expect(names['keystone-idempotency/engine']).toContain('makeIdempotent');
    expect(names['keystone-idempotency/client']).toContain('RetrySafeClient');
    expect(same).toBe(true);
  });

  it('typechecks a consumer and every TypeScript example in the README, under nodenext resolution', async () => {
    expect(readmeBlocks.length).toBeGreaterThanOrEqual(5);
    expect(typechecked.nodenext).toBe('');
  });

  it('typechecks them under bundler resolution (esbuild, CDK) too', async () => {
    expect(typechecked.bundler).toBe('');
  });

  it("runs the README's makeIdempotent example as compiled: one booking for a redelivered event", async () => {
    // Compiled under nodenext (its outDir); run against DynamoDB Local.
    const example = readmeBlocks.findIndex((block) => block.includes('makeIdempotent('));
    expect(example).toBeGreaterThanOrEqual(0);
    const orderId = `ord_${Date.now()}`;
    const runner = `const booked = [];
globalThis.carrier = {
  async book(order, { idempotencyKey }) {
    booked.push(idempotencyKey);
    return { id: 'shp_' + booked.length };
  },
};
const { handler } = await import('./out/readme-${example + 1}.js');
const event = { id: 'evt_1', 'detail-type': 'OrderPlaced', detail: { orderId: ${JSON.stringify(orderId)}, items: ['book'] } };
const first = await handler(event, {});
const again = await handler({ ...event, id: 'evt_2' }, {});
console.log(JSON.stringify({ first, again, booked }));
`;
    await writeFile(join(project, 'run-example.mjs'), runner);
    const { stdout } = await run(process.execPath, ['run-example.mjs'], {
      cwd: project,
      env: {
        PATH: process.env.PATH,
        IDEMPOTENCY_TABLE: db.idempotencyTable,
        ORDERS_TABLE: db.paymentsTable,
        // The SDK's own setting for a service's endpoint: the example's `new DynamoDBClient({})` runs as printed.
        AWS_ENDPOINT_URL_DYNAMODB: process.env.DYNAMODB_ENDPOINT,
        AWS_REGION: 'local',
        AWS_ACCESS_KEY_ID: 'local',
        AWS_SECRET_ACCESS_KEY: 'local',
      },
    });
    const { first, again, booked } = JSON.parse(stdout) as { first: unknown; again: unknown; booked: string[] };
    expect(first).toEqual({ shipmentId: 'shp_1' });
    expect(again).toEqual(first);
    expect(booked).toHaveLength(1);
    expect(booked[0]).toMatch(/^idk_/);
    expect(await db.itemsUnder(`ORDER#${orderId}`)).toBe(1);
  });
});
