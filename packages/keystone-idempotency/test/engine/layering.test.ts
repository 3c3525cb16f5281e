import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The engine is the contract and the lifecycle; the stores are folders beside it, each with its own driver. */
describe('the engine', () => {
  it('imports no store and no database driver', () => {
    const engine = join(__dirname, '..', '..', 'src', 'engine');
    const imports = readdirSync(engine)
      .filter((file) => file.endsWith('.ts'))
      .flatMap((file) =>
        [...readFileSync(join(engine, file), 'utf8').matchAll(/\bfrom '([^']+)'/g)].map((m) => `${file}: ${m[1]}`),
      );
    expect(imports.length).toBeGreaterThan(20);
    expect(imports.filter((line) => /: (pg|pg-.*|@aws-sdk\/.*|\.\.\/.*)$/.test(line))).toEqual([]);
  });
});

/**
 * The Redis store is written as a store outside the package would be: against the engine's published entry point
 * (`keystone-idempotency/engine`, its index) and nothing deeper, so the seam it proves is the one customers get.
 */
describe('the Redis store', () => {
  it('imports nothing of the engine but its published index, and no client at run time', () => {
    const folder = join(__dirname, '..', '..', 'src', 'redis');
    const imports = readdirSync(folder)
      .filter((file) => file.endsWith('.ts'))
      .flatMap((file) =>
        [...readFileSync(join(folder, file), 'utf8').matchAll(/\bfrom '([^']+)'/g)].map((m) => m[1] ?? ''),
      );
    expect(imports).toContain('../engine/index.js');
    expect(imports.filter((path) => !/^(\.\/[\w-]+\.js|\.\.\/engine\/index\.js|node:crypto)$/.test(path))).toEqual([]);
  });
});
