import { join, relative } from 'node:path';
import { build } from 'esbuild';

/** The export condition under which package.json maps each entry point to its source (the repository's tools use it). */
const LIBRARY_SOURCE_CONDITION = 'keystone-source';

/**
 * The client must run in a browser as it is: bundled for the browser, it may pull in its own files, ky, and the HTTP
 * adapter's list of problem types (plain data), and nothing else (no Node built-in, nothing else from the server
 * side such as packages/keystone-idempotency/src/engine or the rest of packages/keystone-idempotency/src/http, nothing of the reference service).
 */
const packageRoot = join(__dirname, '..', '..');

describe('the client bundle', () => {
  it('builds for the browser from packages/keystone-idempotency/src/client, ky and the problem-type list alone', async () => {
    const result = await build({
      entryPoints: [join(packageRoot, 'src', 'client', 'index.ts')],
      absWorkingDir: packageRoot,
      bundle: true,
      conditions: [LIBRARY_SOURCE_CONDITION],
      platform: 'browser',
      format: 'esm',
      target: 'es2022',
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs).map((input) => relative(packageRoot, join(packageRoot, input)));
    expect(inputs).toEqual(expect.arrayContaining(['src/client/client.ts', 'src/client/operation.ts']));
    expect(inputs.filter((input) => !/^(src\/client\/|(\.\.\/)*node_modules\/ky\/)/.test(input))).toEqual([
      'src/http/problem-types.ts',
    ]);
  });
});
