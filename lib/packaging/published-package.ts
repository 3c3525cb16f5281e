import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/** The fields of this repository's package.json the published package is made from. */
export interface RepositoryManifest {
  readonly name: string;
  readonly version: string;
  readonly description?: string;
  readonly license?: string;
  readonly keywords?: readonly string[];
  readonly repository?: { readonly type: string; readonly url: string };
  readonly homepage?: string;
  readonly bugs?: { readonly url: string };
  readonly engines?: Record<string, string>;
  readonly sideEffects?: boolean;
  readonly exports: Record<string, unknown>;
  readonly main?: string;
  readonly types?: string;
  readonly dependencies?: Record<string, string>;
  readonly peerDependencies?: Record<string, string>;
  readonly peerDependenciesMeta?: Record<string, { readonly optional?: boolean }>;
}

/** Where the package's README is written (relative links in it are relative to this folder). */
export const PACKAGE_README = join('package', 'README.md');

/**
 * The published package.json: the repository's, for a package whose root is dist/. Entry points lose their `./dist`
 * prefix; what only the repository has (scripts, dev dependencies, overrides, `private`, `files`) is left out.
 */
export function publishedManifest(manifest: RepositoryManifest): Record<string, unknown> {
  const undist = (path: string) => path.replace(/^\.\/dist\//, './');
  const exports = JSON.parse(JSON.stringify(manifest.exports), (_key, value: unknown) =>
    typeof value === 'string' ? undist(value) : value,
  ) as Record<string, unknown>;
  return {
    name: manifest.name,
    version: manifest.version,
    description: manifest.description,
    license: manifest.license,
    keywords: manifest.keywords,
    repository: manifest.repository,
    homepage: manifest.homepage,
    bugs: manifest.bugs,
    engines: manifest.engines,
    type: 'module',
    sideEffects: manifest.sideEffects,
    exports,
    main: manifest.main && undist(manifest.main),
    types: manifest.types && undist(manifest.types),
    dependencies: manifest.dependencies,
    peerDependencies: manifest.peerDependencies,
    peerDependenciesMeta: manifest.peerDependenciesMeta,
  };
}

/**
 * The package's README as npm shows it: package/README.md, with every relative link (to a file of this repository,
 * with or without a fragment) made absolute against the repository's URL, since npm resolves none. Links within the
 * README (`#section`) and absolute ones stay as they are. A link to a file that does not exist fails the build.
 */
export function packageReadme(root: string, manifest: RepositoryManifest): string {
  const base = repositoryBrowseUrl(manifest);
  const source = join(root, PACKAGE_README);
  return readFileSync(source, 'utf8').replace(/\]\(([^)\s]+)\)/g, (link, target: string) => {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) return link;
    const [path = '', fragment] = target.split('#');
    const file = resolve(dirname(source), path);
    if (!existsSync(file)) throw new Error(`${PACKAGE_README} links to ${target}, which does not exist`);
    const inRepository = relative(root, file).split('\\').join('/');
    return `](${base}/${inRepository}${fragment === undefined ? '' : `#${fragment}`})`;
  });
}

/** `https://github.com/owner/name/blob/main`: where a file of the repository is shown, from `repository.url`. */
export function repositoryBrowseUrl(manifest: RepositoryManifest): string {
  const url = manifest.repository?.url;
  const match = url && /^(?:git\+)?(https:\/\/github\.com\/[^/]+\/[^/.]+)(?:\.git)?$/.exec(url);
  if (!match?.[1])
    throw new Error(`package.json needs repository.url on GitHub (git+https://github.com/…), not ${url}`);
  return `${match[1]}/blob/main`;
}
