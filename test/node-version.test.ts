import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import semver from 'semver';
import { LAMBDA_RUNTIME } from '../lib/infra/service-function';

/**
 * One Node version story: package.json's engines name the supported lines, .nvmrc picks the one to develop on,
 * Lambda runs one of them, and every locked package installs on all of them.
 */
const ROOT = path.resolve(__dirname, '..');
const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8'));
const engines: string = pkg.engines.node;
const nvmrc = readFileSync(path.join(ROOT, '.nvmrc'), 'utf8').trim();

/** The oldest release of each supported line (`^20.20.0 || ^22.13.0` → 20.20.0, 22.13.0). */
const oldestSupported = new semver.Range(engines).set.map((comparators) =>
  semver.minVersion(new semver.Range(comparators.map((comparator) => comparator.value).join(' '))),
);

describe('Node versions', () => {
  it('supports exactly two lines: 20.20 (this machine and CI) and 22 (the Lambda runtime)', () => {
    expect(oldestSupported.map(String)).toEqual(['20.20.0', '22.13.0']);
    expect(semver.satisfies(process.version, engines)).toBe(true);
  });

  it("develops on the Lambda runtime's line (.nvmrc)", () => {
    expect(LAMBDA_RUNTIME.name).toBe(`nodejs${nvmrc}.x`);
    // `nvm use` picks the newest 22 installed; engines must accept that line.
    expect(semver.intersects(nvmrc, engines)).toBe(true);
  });

  /**
   * The one exception, by name: AWS's durable execution SDK (and its local runner) declare Node 22, the line Lambda's
   * durable functions run on; only `keystone-idempotency/durable` loads it (an optional peer), and its README row and
   * docs page say it needs Node 22. On 20.20 npm warns EBADENGINE for these two and the tests run them anyway.
   */
  const NODE_22_ONLY = [
    'node_modules/@aws/durable-execution-sdk-js',
    'node_modules/@aws/durable-execution-sdk-js-testing',
  ];

  it('locks no package that refuses a supported line (npm would warn EBADENGINE, or worse, break on it)', () => {
    const refusing: string[] = [];
    for (const [location, entry] of Object.entries(lock.packages as Record<string, { engines?: { node?: string } }>)) {
      const range = entry.engines?.node;
      if (!location || !range || NODE_22_ONLY.includes(location)) continue;
      for (const version of oldestSupported) {
        if (!semver.satisfies(version!, range)) refusing.push(`${location} (node ${range}) refuses ${version}`);
      }
    }
    expect(refusing).toEqual([]);
  });
});
