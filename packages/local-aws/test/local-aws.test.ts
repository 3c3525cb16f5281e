import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The local AWS emulation is a package of its own that knows nothing of the service it runs: it imports its own
 * files, Node's, and the packages its package.json names, never the service's lib/ nor the library (a stand-in for
 * API Gateway must not read headers through the code it is there to test).
 */
const packageRoot = join(__dirname, '..');
const manifest = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
};

describe('@keystone-idempotency/local-aws', () => {
  const files = readdirSync(join(packageRoot, 'src')).filter((file) => /\.(ts|mjs)$/.test(file));

  it('imports only itself, Node and its own dependencies', () => {
    expect(files.length).toBeGreaterThan(20);
    const allowed = (specifier: string) =>
      specifier.startsWith('./') ||
      specifier.startsWith('node:') ||
      specifier === 'aws-lambda' || // types only (@types/aws-lambda)
      Object.keys(manifest.dependencies).some((name) => specifier === name || specifier.startsWith(`${name}/`));
    const outside = files.flatMap((file) =>
      [...readFileSync(join(packageRoot, 'src', file), 'utf8').matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)]
        .map((match) => match[1] ?? '')
        .filter((specifier) => !allowed(specifier))
        .map((specifier) => `${file} imports ${specifier}`),
    );
    expect(outside).toEqual([]);
  });

  it('says nothing of payments outside its examples', () => {
    const code = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
    const mentions = files.filter((file) =>
      /payment|processor|settlement|keystone-idempotency\//i.test(
        code(readFileSync(join(packageRoot, 'src', file), 'utf8')),
      ),
    );
    expect(mentions).toEqual([]);
  });
});
