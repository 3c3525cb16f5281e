import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import ts from 'typescript';

/**
 * The package's entry points are written down in four places that must agree: package.json `exports` (what a
 * consumer gets), tsconfig.build.json `include` (what is built into dist/), tsconfig.json `paths` (how this
 * repository's own code resolves the package's name to the sources, for tsc, esbuild and tsx) and jest's
 * `moduleNameMapper` (the same, for jest). One forgotten list would have the reference service compile against one
 * thing and ship another.
 */
const root = join(__dirname, '..', '..');
const manifest = require(join(root, 'package.json')) as { name: string; exports: Record<string, unknown> };
const jestProjects = (
  require(join(root, 'jest.config.js')) as { projects: { moduleNameMapper: Record<string, string> }[] }
).projects;
/** Every project of jest's maps the package the same way; the first stands for them all (a test checks). */
const jestConfig = jestProjects[0]!;

function tsconfig(file: string): { compilerOptions: { paths?: Record<string, string[]> }; include: string[] } {
  const { config, error } = ts.readConfigFile(join(root, file), ts.sys.readFile);
  if (error) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, '\n'));
  return config;
}

/** Each entry point (`keystone-idempotency/http`) and the source folder its `exports` target is built from. */
const entryPoints = Object.entries(manifest.exports)
  .filter(([subpath]) => subpath !== './package.json')
  .map(([subpath, target]) => {
    const built = (target as { default: string }).default;
    const folder = /^\.\/dist\/([a-z]+)\/index\.js$/.exec(built)?.[1];
    if (!folder) throw new Error(`${subpath} points at ${built}, not at dist/<folder>/index.js`);
    return { name: subpath === '.' ? manifest.name : `${manifest.name}/${subpath.slice(2)}`, folder };
  });

describe("the package's entry points", () => {
  it('each have a source folder with an index, built by tsconfig.build.json', () => {
    const built = tsconfig('tsconfig.build.json').include;
    for (const { folder } of entryPoints) {
      expect(existsSync(join(root, 'lib', folder, 'index.ts'))).toBe(true);
      expect(built).toContain(`lib/${folder}`);
    }
    expect(new Set(built)).toEqual(new Set(entryPoints.map(({ folder }) => `lib/${folder}`)));
  });

  it("resolve to those sources in tsconfig.json's paths, and nothing else does", () => {
    const paths = tsconfig('tsconfig.json').compilerOptions.paths ?? {};
    expect(paths).toEqual(
      Object.fromEntries(entryPoints.map(({ name, folder }) => [name, [`./lib/${folder}/index.ts`]])),
    );
  });

  it('resolve to those sources when esbuild bundles (the CDK functions, the bench), never to a build', async () => {
    const result = await build({
      stdin: { contents: entryPoints.map(({ name }) => `export * from '${name}';`).join('\n'), resolveDir: root },
      bundle: true,
      platform: 'node',
      format: 'esm',
      packages: 'bundle',
      // The CDK construct's library is a deploy-time dependency, and bundling it alone takes most of a loaded
      // machine's test timeout; what is checked here is where our own names resolve.
      external: ['aws-cdk-lib', 'aws-cdk-lib/*', 'constructs'],
      mainFields: ['module', 'main'],
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const ours = Object.keys(result.metafile.inputs).filter((input) => !input.startsWith('node_modules/'));
    for (const { folder } of entryPoints) expect(ours).toContain(`lib/${folder}/index.ts`);
    expect(ours.filter((input) => !/^lib\/[a-z]+\/([a-z-]+\/)*[a-z-]+\.ts$/.test(input))).toEqual(['<stdin>']);
  });

  it('resolve to those sources under tsx (the local stack, the CDK app), never to a build', async () => {
    const resolved = entryPoints.map(({ name }) => `require.resolve(${JSON.stringify(name)})`).join(', ');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [require.resolve('tsx/cli'), '-e', `console.log(JSON.stringify([${resolved}]))`],
      { cwd: root },
    );
    expect(JSON.parse(stdout)).toEqual(entryPoints.map(({ folder }) => join(root, 'lib', folder, 'index.ts')));
  });

  it("resolve to the same sources in jest's moduleNameMapper", () => {
    const mapped = (name: string): string | undefined => {
      for (const [pattern, target] of Object.entries(jestConfig.moduleNameMapper)) {
        const match = new RegExp(pattern).exec(name);
        if (match) return target.replace(/\$(\d)/g, (_, group: string) => match[Number(group)] ?? '');
      }
      return undefined;
    };
    for (const { name, folder } of entryPoints) expect(mapped(name)).toBe(`<rootDir>/lib/${folder}/index.ts`);
    expect(mapped(`${manifest.name}/payments`)).toBeUndefined();
    for (const project of jestProjects) expect(project.moduleNameMapper).toEqual(jestConfig.moduleNameMapper);
  });
});

/** Every TypeScript file under a folder, recursively. */
function sources(folder: string): string[] {
  return readdirSync(join(root, folder), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => join(folder, file));
}

describe('the code outside the package', () => {
  it('imports it only through its entry points, as a customer would', () => {
    const library = new Set(entryPoints.map(({ folder }) => `lib/${folder}`));
    const outside = ['functions', 'bin', 'lib'].flatMap(sources).filter((file) => {
      const [, folder] = file.split('/');
      return !(file.startsWith('lib/') && library.has(`lib/${folder}`));
    });
    expect(outside.length).toBeGreaterThan(50);
    const deep = outside.flatMap((file) => {
      const text = readFileSync(join(root, file), 'utf8');
      return [...text.matchAll(/\bfrom '(\.[^']+)'/g)]
        .map((match) => relative(root, resolve(root, dirname(file), match[1] ?? '')))
        .filter((target) => library.has(target.split('/').slice(0, 2).join('/')))
        .map((target) => `${file} imports ${target}`);
    });
    expect(deep).toEqual([]);
  });
});
