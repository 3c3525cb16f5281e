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
