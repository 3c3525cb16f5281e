import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';

/** The export condition under which package.json maps each entry point to its source (the repository's tools use it). */
const LIBRARY_SOURCE_CONDITION = 'keystone-source';

/**
 * The package README says what `zod/mini` saves a handler that validates its body with `validateJsonBody`, against
 * the same schema in classic zod: this measures both, as a function's bundle holds them (esbuild, minified, ESM, the
 * way the reference stack bundles), and holds the README's figures to the measurement.
 */
const packageRoot = join(__dirname, '..', '..');
const readme = readFileSync(join(packageRoot, 'README.md'), 'utf8');

const HANDLERS = {
  mini: `import { validateJsonBody } from 'keystone-idempotency/http';
import * as z from 'zod/mini';
export const validate = validateJsonBody(
  z.strictObject({ amount: z.number().check(z.int(), z.positive()), currency: z.string().check(z.length(3)) }),
);`,
  classic: `import { validateJsonBody } from 'keystone-idempotency/http';
import { z } from 'zod';
export const validate = validateJsonBody(
  z.strictObject({ amount: z.number().int().positive(), currency: z.string().length(3) }),
);`,
};

/** KB of zod in the minified bundle of a handler. */
async function zodKb(contents: string): Promise<number> {
  const result = await build({
    stdin: { contents, resolveDir: packageRoot, loader: 'ts' },
    bundle: true,
    conditions: [LIBRARY_SOURCE_CONDITION],
    minify: true,
    platform: 'node',
    format: 'esm',
    mainFields: ['module', 'main'],
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
  const [output] = Object.values(result.metafile.outputs);
  const bytes = Object.entries(output?.inputs ?? {})
    .filter(([input]) => input.includes('node_modules/zod/'))
    .reduce((sum, [, { bytesInOutput }]) => sum + bytesInOutput, 0);
  return bytes / 1024;
}

describe('validateJsonBody with zod/mini', () => {
  it('bundles the zod the package README says, against classic zod', async () => {
    const stated =
      /about\s+\*\*(\d+) KB\*\*\s+of zod, where the same schema in classic zod bundles about\s+\*\*(\d+) KB\*\*/.exec(
        readme,
      );
    expect(stated).not.toBeNull();
    const [mini, classic] = [Number(stated?.[1]), Number(stated?.[2])];
    const measured = { mini: await zodKb(HANDLERS.mini), classic: await zodKb(HANDLERS.classic) };
    expect(measured.mini).toBeGreaterThan(mini * 0.75);
    expect(measured.mini).toBeLessThan(mini * 1.25);
    expect(measured.classic).toBeGreaterThan(classic * 0.75);
    expect(measured.classic).toBeLessThan(classic * 1.25);
  });
});
