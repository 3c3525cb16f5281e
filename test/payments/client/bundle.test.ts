import { join, relative } from 'node:path';
import { build } from 'esbuild';
import { BUNDLE_CONDITIONS } from '../../../lib/infra/library-source';

/**
 * The payments client runs in the demo page as it is: bundled for the browser, it pulls in the library's client (by
 * the package's name), the payment schema and zod, and nothing else of the service (no handler, no store, no HTTP
 * adapter: the page must not carry the server).
 */
const root = join(__dirname, '..', '..', '..');

describe('the payments client bundle', () => {
  it('builds for the browser from itself, the payment schema, the library client, ky and zod', async () => {
    const result = await build({
      entryPoints: [join(root, 'lib', 'payments', 'client', 'index.ts')],
      bundle: true,
      conditions: [...BUNDLE_CONDITIONS],
      platform: 'browser',
      format: 'esm',
      target: 'es2022',
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs).map((input) => relative(root, join(root, input)));
    expect(inputs).toEqual(
      expect.arrayContaining(['packages/keystone-idempotency/src/client/index.ts', 'lib/payments/payment-schema.ts']),
    );
    const others = inputs.filter(
      (input) =>
        !/^(packages\/keystone-idempotency\/src\/client\/|lib\/payments\/client\/|node_modules\/(ky|zod)\/)/.test(
          input,
        ),
    );
    // Not schema.ts: the request's rules need the server's SQS text rule; the answer's schema needs nothing but zod.
    expect(others.sort()).toEqual([
      'lib/payments/payment-schema.ts',
      'lib/payments/problem-types.ts',
      'packages/keystone-idempotency/src/http/problem-types.ts',
    ]);
  });
});
