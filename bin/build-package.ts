import { execFileSync } from 'node:child_process';
import { copyFileSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageReadme, publishedManifest, type RepositoryManifest } from '../lib/packaging/published-package';

/**
 * `npm run build`: the published package, assembled in dist/, which is its root (`npm pack ./dist`, `npm publish
 * ./dist`; `npm run package` does the first):
 *
 * - the library's folders (tsconfig.build.json) compiled to ES modules and declarations, one file per source file;
 * - its package.json, made from this repository's: the same name, version, entry points (without the `dist/`
 *   prefix), dependencies and peers, `"type": "module"`, and nothing of the repository's own (scripts, dev
 *   dependencies, overrides, `private`);
 * - its README, package/README.md with every link into this repository made absolute (npm shows no relative
 *   link), and the LICENSE.
 *
 * The repository's own package.json is private: it is the reference service, its tools and its tests, and is never
 * published itself. Nothing in this repository runs from dist/: tsc, esbuild, tsx and jest resolve
 * `keystone-idempotency/*` to the sources (tsconfig `paths`, jest's `moduleNameMapper`), so tests never need a
 * build and never meet a stale one. dist/ is emptied first, so a source file that was deleted or moved is not
 * shipped from an earlier build.
 */
const root = join(__dirname, '..');
const dist = join(root, 'dist');

rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json')], {
  stdio: 'inherit',
});
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as RepositoryManifest;
writeFileSync(join(dist, 'package.json'), `${JSON.stringify(publishedManifest(manifest), null, 2)}\n`);
writeFileSync(join(dist, 'README.md'), packageReadme(root, manifest));
copyFileSync(join(root, 'LICENSE'), join(dist, 'LICENSE'));
