import { readFileSync } from 'node:fs';

/**
 * The version of the esbuild installed in the project (a devDependency, pinned by package-lock.json), or a synth-time
 * error that says what to do.
 *
 * `NodejsFunction` bundles with a local esbuild when it finds one; when it doesn't, it quietly builds a Docker image
 * and bundles in that, `forceDockerBundling: false` notwithstanding (that option only forces Docker, it never forbids
 * it). A machine without Docker then fails with a Docker error, and one with Docker bundles with whatever esbuild
 * the image brings. Checking first turns both into one clear message.
 */
export function localEsbuildVersion(projectRoot: string): string {
  let manifest: string;
  try {
    manifest = require.resolve('esbuild/package.json', { paths: [projectRoot] });
  } catch {
    throw new Error(
      `esbuild is not installed in ${projectRoot}: run \`npm ci\` first. The functions are bundled with the ` +
        "project's own esbuild (a devDependency), never in Docker, so synthesis stops here instead of falling back " +
        'to a Docker build.',
    );
  }
  const { version } = JSON.parse(readFileSync(manifest, 'utf8')) as { version: string };
  return version;
}
