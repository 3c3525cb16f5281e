import { join, relative } from 'node:path';
import { build } from 'esbuild';
import { LIBRARY_SOURCE_CONDITION } from '../../lib/infra/library-source';

/**
 * The client must run in a browser as it is: bundled for the browser, it may pull in its own files, ky, and the HTTP
 * adapter's list of problem types (plain data), and nothing else (no Node built-in, nothing else from the server
 * side such as packages/keystone-idempotency/src/engine or the rest of packages/keystone-idempotency/src/http, nothing of the reference service).
 */
const root = join(__dirname, '..', '..');

describe('the client bundle', () => {
  it('builds for the browser from packages/keystone-idempotency/src/client, ky and the problem-type list alone', async () => {
    const result = await build({
      entryPoints: [join(root, 'packages', 'keystone-idempotency', 'src', 'client', 'index.ts')],
      bundle: true,
      conditions: [LIBRARY_SOURCE_CONDITION],
      platform: 'browser',
      format: 'esm',
      target: 'es2022',
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs).map((input) => relative(root, join(root, input)));
    expect(inputs).toEqual(
      expect.arrayContaining([
        'packages/keystone-idempotency/src/client/client.ts',
        'packages/keystone-idempotency/src/client/operation.ts',
      ]),
    );
    expect(
      inputs.filter((input) => !/^(packages\/keystone-idempotency\/src\/client\/|node_modules\/ky\/)/.test(input)),
    ).toEqual(['packages/keystone-idempotency/src/http/problem-types.ts']);
  });
});
