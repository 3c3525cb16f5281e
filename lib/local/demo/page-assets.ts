import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { build } from 'esbuild';
import { BUNDLE_CONDITIONS } from '../../infra/library-source';

/** The page's three files, ready to serve. */
export interface PageAssets {
  readonly html: string;
  readonly css: string;
  /** `page/main.ts` and what it imports (the client in packages/keystone-idempotency/src/client, ky), bundled for the browser. */
  readonly script: string;
}

const PAGE_DIR = join(__dirname, 'page');

/**
 * Bundles the page's script with esbuild at start (about 100 ms), so the page always runs the client as it is in
 * packages/keystone-idempotency/src/client, never a stale or copied build. `platform: 'browser'` makes a Node built-in anywhere in that code a
 * build error rather than a broken page.
 */
export async function buildPageAssets(): Promise<PageAssets> {
  const [html, css, bundle] = await Promise.all([
    readFile(join(PAGE_DIR, 'index.html'), 'utf8'),
    readFile(join(PAGE_DIR, 'styles.css'), 'utf8'),
    build({
      entryPoints: [join(PAGE_DIR, 'main.ts')],
      tsconfig: join(PAGE_DIR, 'tsconfig.json'),
      bundle: true,
      conditions: [...BUNDLE_CONDITIONS],
      platform: 'browser',
      format: 'esm',
      target: 'es2022',
      sourcemap: 'inline',
      write: false,
      logLevel: 'silent',
    }),
  ]);
  const script = bundle.outputFiles[0]?.text;
  if (script === undefined) throw new Error('esbuild produced no bundle for the demo page');
  return { html, css, script };
}
