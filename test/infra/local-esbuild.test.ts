import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { localEsbuildVersion } from '../../lib/infra/local-esbuild';

const ROOT = path.resolve(__dirname, '..', '..');

describe('localEsbuildVersion', () => {
  it("finds the project's own esbuild, the one package-lock.json pins", () => {
    const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8'));
    expect(localEsbuildVersion(ROOT)).toBe(lock.packages['node_modules/esbuild'].version);
  });

  it('fails synthesis with what to do, instead of letting CDK fall back to Docker, where esbuild is missing', () => {
    const empty = mkdtempSync(path.join(tmpdir(), 'keystone-no-esbuild-'));
    try {
      expect(() => localEsbuildVersion(empty)).toThrow(
        new RegExp(`^esbuild is not installed in ${empty}: run \`npm ci\` first\\..*never in Docker`),
      );
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
