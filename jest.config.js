/**
 * Node 20.20 is a supported line (package.json engines; README, "Node versions"), so the AWS SDK's notice that its
 * releases after January 2027 need Node 22 says nothing new here; printed once by every worker and child process, it
 * was most of what `npm test` printed. Set before the workers start, so they and their children inherit it.
 */
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

/**
 * Jest runs TypeScript through @swc/jest (no type-checking here: `npm run typecheck` does that).
 * middy and ky are ESM-only: let swc transform them (and point jest at middy's entry file).
 * @type {import('jest').Config}
 */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.(t|j)s$': ['@swc/jest'] },
  transformIgnorePatterns: ['/node_modules/(?!(@middy|@redocly|ky)/)'],
  moduleNameMapper: {
    '^@middy/([^/]+)$': '<rootDir>/node_modules/@middy/$1/index.js',
    // The library's sources import each other as Node ESM must (`./store.js`): jest finds the `.ts` behind them.
    '^(\\.{1,2}/.*)\\.js$': '$1',
    // The package's own entry points, as tsconfig.json's `paths` resolve them: to the sources, never to a build.
    '^keystone-idempotency$': '<rootDir>/lib/engine/index.ts',
    '^keystone-idempotency/(engine|dynamodb|postgres|http|sqs|natural|client|cdk)$': '<rootDir>/lib/$1/index.ts',
  },
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 30_000,
  maxWorkers: 2,
};
