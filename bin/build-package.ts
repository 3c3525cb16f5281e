import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * `npm run build`, and `npm pack` / `npm publish` through `prepack`: the library's folders (tsconfig.build.json)
 * compiled to ES modules and declarations under dist/, which is all the package ships.
 *
 * Nothing in this repository runs from dist/: tsc, esbuild, tsx and jest resolve `keystone-idempotency/*` to the
 * sources (tsconfig `paths`, jest's `moduleNameMapper`), so tests never need a build and never meet a stale one.
 *
 * dist/ is emptied first, so a source file that was deleted or moved is not shipped from an earlier build. The
 * repository's own package.json has no `"type"` (its tools and tests are CommonJS), so dist/ gets a package.json of
 * its own saying its `.js` files are ES modules, as Powertools does for its `lib/esm`.
 */
const root = join(__dirname, '..');
const dist = join(root, 'dist');

rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json')], {
  stdio: 'inherit',
});
writeFileSync(join(dist, 'package.json'), `${JSON.stringify({ type: 'module' }, null, 2)}\n`);
