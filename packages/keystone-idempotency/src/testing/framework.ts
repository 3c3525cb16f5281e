/**
 * The two functions of a test framework the published suites register their tests with: jest's and vitest's globals
 * fit as they are, and so does node:test's `describe` and `it`. Typed here rather than taken from `@jest/globals`, so
 * that the suites depend on no framework.
 */
export interface TestFramework {
  describe(name: string, body: () => void): void;
  it(name: string, test: () => Promise<void>, timeoutMs?: number): void;
}

/** The framework passed in, or the host's globals (jest and vitest with `globals: true` define them). */
export function frameworkOf(given: Partial<TestFramework> = {}): TestFramework {
  const globals = globalThis as Partial<TestFramework>;
  const describe = given.describe ?? globals.describe;
  const it = given.it ?? globals.it;
  if (typeof describe !== 'function' || typeof it !== 'function') {
    throw new TypeError(
      'no describe/it to register the tests with: pass { describe, it } from your test framework, or run under ' +
        'jest, or vitest with globals: true',
    );
  }
  return { describe, it };
}
