import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import ts from 'typescript';
import { BUNDLE_CONDITIONS, LIBRARY_SOURCE_CONDITION } from '../../lib/infra/library-source';
import { LAMBDA_BUNDLING } from '../../lib/infra/service-function';

/**
 * The library is a workspace package whose package.json is its published manifest. Its `exports` give each entry
 * point twice: a `keystone-source` condition naming the TypeScript source, and the build (`types`, `default`) a
 * customer gets. Everything in this repository that runs or compiles the service (tsc, jest, tsx, esbuild, the CDK
 * app) resolves the library by name under that condition, so it never meets a build, stale or missing; a customer,
 * without the condition, meets nothing else.
 */
const root = join(__dirname, '..', '..');
const packageRoot = join(root, 'packages', 'keystone-idempotency');
const manifest = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as {
  name: string;
  exports: Record<string, string | Record<string, string>>;
  files: string[];
};
const service = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  workspaces: string[];
};

function tsconfig(file: string): { compilerOptions: Record<string, unknown>; include: string[] } {
  const { config, error } = ts.readConfigFile(file, ts.sys.readFile);
  if (error) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, '\n'));
  return config;
}

/** Each entry point (`keystone-idempotency/http`), its source and its build. */
const entryPoints = Object.entries(manifest.exports)
  .filter(([subpath]) => subpath !== './package.json')
  .map(([subpath, target]) => {
    if (typeof target === 'string') throw new Error(`${subpath} has no conditions`);
    const source = target[LIBRARY_SOURCE_CONDITION];
    const folder = source && /^\.\/src\/([a-z]+)\/index\.ts$/.exec(source)?.[1];
    if (!folder) throw new Error(`${subpath}'s ${LIBRARY_SOURCE_CONDITION} is ${source}, not ./src/<folder>/index.ts`);
    return {
      name: subpath === '.' ? manifest.name : `${manifest.name}/${subpath.slice(2)}`,
      folder,
      source: join(packageRoot, 'src', folder, 'index.ts'),
      target,
    };
  });

describe("the library's entry points", () => {
  it('each name a source with an index, and its build in dist/ after it', () => {
    expect(entryPoints.length).toBeGreaterThanOrEqual(8);
    for (const { folder, source, target } of entryPoints) {
      expect(existsSync(source)).toBe(true);
      // The source condition first: conditions are matched in the order written.
      expect(Object.keys(target)).toEqual([LIBRARY_SOURCE_CONDITION, 'types', 'default']);
      expect(target).toMatchObject({ types: `./dist/${folder}/index.d.ts`, default: `./dist/${folder}/index.js` });
    }
    const built = tsconfig(join(packageRoot, 'tsconfig.build.json'));
    expect(built.include).toEqual(['src']);
    expect(built.compilerOptions).toMatchObject({ rootDir: 'src', outDir: 'dist' });
  });

  it('are a dependency of the service by name, from the workspace, with no path aliases', () => {
    expect(service.workspaces).toEqual(['packages/*']);
    expect(service.dependencies[manifest.name]).toBeDefined();
    const options = tsconfig(join(root, 'tsconfig.json')).compilerOptions;
    expect(options.paths).toBeUndefined();
    expect(options.customConditions).toEqual([LIBRARY_SOURCE_CONDITION]);
  });

  it('resolve to their sources in every tool that runs the service: tsx, the CDK app, esbuild, jest', () => {
    const flag = `--conditions=${LIBRARY_SOURCE_CONDITION}`;
    for (const script of ['start', 'processor', 'openapi', 'bench']) expect(service.scripts[script]).toContain(flag);
    const cdk = JSON.parse(readFileSync(join(root, 'cdk.json'), 'utf8')) as { app: string };
    expect(cdk.app).toContain(flag);
    expect(LAMBDA_BUNDLING.esbuildArgs).toEqual({ '--conditions': `${LIBRARY_SOURCE_CONDITION},module` });
    for (const { name, source } of entryPoints) expect(require.resolve(name)).toBe(source);
  });

  it('resolve to those sources when esbuild bundles as the CDK functions do, never to a build', async () => {
    const result = await build({
      stdin: { contents: entryPoints.map(({ name }) => `export * from '${name}';`).join('\n'), resolveDir: root },
      bundle: true,
      platform: 'node',
      format: 'esm',
      packages: 'bundle',
      conditions: [...BUNDLE_CONDITIONS],
      // The CDK construct's library is a deploy-time dependency, and bundling it alone takes most of a loaded
      // machine's test timeout; what is checked here is where our own names resolve.
      external: ['aws-cdk-lib', 'aws-cdk-lib/*', 'constructs'],
      mainFields: ['module', 'main'],
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const ours = Object.keys(result.metafile.inputs).filter((input) => !input.startsWith('node_modules/'));
    for (const { folder } of entryPoints)
      expect(ours).toContain(`packages/keystone-idempotency/src/${folder}/index.ts`);
    expect(
      ours.filter((input) => !/^packages\/keystone-idempotency\/src\/[a-z]+\/([a-z-]+\/)*[a-z-]+\.ts$/.test(input)),
    ).toEqual(['<stdin>']);
  });

  it('resolve to those sources under tsx with the flag the scripts pass, never to a build', async () => {
    const resolved = entryPoints.map(({ name }) => `require.resolve(${JSON.stringify(name)})`).join(', ');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        require.resolve('tsx/cli'),
        `--conditions=${LIBRARY_SOURCE_CONDITION}`,
        '-e',
        `console.log(JSON.stringify([${resolved}]))`,
      ],
      { cwd: root, env: { ...process.env, NODE_OPTIONS: '' } },
    );
    expect(JSON.parse(stdout)).toEqual(entryPoints.map(({ source }) => source));
  });
});

/** Every TypeScript file under a folder, recursively. */
function sources(folder: string): string[] {
  return readdirSync(join(root, folder), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => join(folder, file));
}

describe('the service', () => {
  it('imports the library only through its entry points, as a customer would (its tests and bench too)', () => {
    const outside = ['functions', 'bin', 'lib', 'test', 'bench'].flatMap(sources);
    expect(outside.length).toBeGreaterThan(50);
    const deep = outside.flatMap((file) => {
      const text = readFileSync(join(root, file), 'utf8');
      return (
        [...text.matchAll(/\bfrom '(\.[^']+)'/g)]
          .map((match) => relative(root, resolve(root, dirname(file), match[1] ?? '')))
          .filter((target) => target.startsWith('packages/'))
          // The one exception: test/support re-exports a few of the library's own test fixtures, one copy of each.
          .filter(
            (target) => !(file.startsWith('test/support/') && target.startsWith('packages/keystone-idempotency/test/')),
          )
          .map((target) => `${file} imports ${target}`)
      );
    });
    expect(deep).toEqual([]);
  });
});

describe('the library', () => {
  it('imports nothing outside its package (sources and tests) but the packages its manifest names, and local-aws', () => {
    const library = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as Record<
      'dependencies' | 'peerDependencies' | 'devDependencies',
      Record<string, string> | undefined
    >;
    const named = [library.dependencies, library.peerDependencies, library.devDependencies].flatMap((deps) =>
      Object.keys(deps ?? {}),
    );
    const allowed = (specifier: string) =>
      specifier.startsWith('node:') ||
      specifier === 'aws-lambda' || // types only (@types/aws-lambda, a peer)
      [manifest.name, '@keystone-idempotency/local-aws', ...named].some(
        (name) => specifier === name || specifier.startsWith(`${name}/`),
      );
    const files = ['src', 'test'].flatMap((folder) => sources(join('packages', 'keystone-idempotency', folder)));
    expect(files.length).toBeGreaterThan(100);
    const outside = files.flatMap((file) =>
      // Static imports and re-exports (`import … from '…'`, `export … from '…'`, `import '…'`), and dynamic ones.
      [
        ...readFileSync(join(root, file), 'utf8').matchAll(
          /^\s*(?:import|export)\s[^;]*?\bfrom\s*'([^']+)'|^\s*import\s*'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/gm,
        ),
      ]
        .map((match) => match[1] ?? match[2] ?? match[3] ?? '')
        .filter((specifier) =>
          specifier.startsWith('.')
            ? relative(packageRoot, resolve(root, dirname(file), specifier)).startsWith('..')
            : !allowed(specifier),
        )
        .map((specifier) => `${file} imports ${specifier}`),
    );
    expect(outside).toEqual([]);
  });
});
