import { join, relative } from 'node:path';
import { build } from 'esbuild';

/**
 * The client must run in a browser as it is: bundled for the browser, it may pull in its own files, ky, and the HTTP
 * adapter's list of problem types (plain data), and nothing else (no Node built-in, nothing else from the server
 * side such as lib/engine or the rest of lib/http, nothing of the reference service).
 */
const root = join(__dirname, '..', '..');

describe('the client bundle', () => {
  it('builds for the browser from lib/client, ky and the problem-type list alone', async () => {
    const result = await build({
      entryPoints: [join(root, 'lib', 'client', 'index.ts')],
      bundle: true,
      platform: 'browser',
      format: 'esm',
      target: 'es2022',
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs).map((input) => relative(root, join(root, input)));
    expect(inputs).toEqual(expect.arrayContaining(['lib/client/client.ts', 'lib/client/operation.ts']));
    expect(inputs.filter((input) => !/^(lib\/client\/|node_modules\/ky\/)/.test(input))).toEqual([
      'lib/http/problem-types.ts',
    ]);
  });
});
