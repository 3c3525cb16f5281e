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
const base = {
  testEnvironment: 'node',
  // The library's package.json maps each entry point under this condition to its source (tsconfig.json's
  // customConditions): the service's tests import it by name and run its TypeScript, never a build.
  testEnvironmentOptions: { customExportConditions: ['keystone-source', 'node', 'node-addons'] },
  // The service's tests, the library's own (packages/keystone-idempotency/test), and the local AWS emulation's.
  roots: ['<rootDir>/test', '<rootDir>/packages/keystone-idempotency/test', '<rootDir>/packages/local-aws/test'],
  transform: { '^.+\\.(t|j)s$': ['@swc/jest'] },
  transformIgnorePatterns: ['/node_modules/(?!(@middy|@redocly|ky)/)'],
  moduleNameMapper: {
    '^@middy/([^/]+)$': '<rootDir>/node_modules/@middy/$1/index.js',
    // The library's sources import each other as Node ESM must (`./store.js`): jest finds the `.ts` behind them.
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
};

/**
 * The end-to-end suites that run on both stores: the same files, a second time with the local stack on PostgreSQL
 * (the e2e fixture reads E2E_STORE). The DynamoDB fault proxy's suite and the PostgreSQL wire proxy's each run on
 * their own store only.
 */
const ON_BOTH_STORES = [
  '**/test/e2e/payments.test.ts',
  '**/test/e2e/orders.test.ts',
  '**/test/e2e/front-doors.test.ts',
  '**/test/e2e/recovery.test.ts',
  '**/test/e2e/recovery-backlog.test.ts',
  '**/test/e2e/settlement.test.ts',
  '**/test/e2e/settlement-latency.test.ts',
  '**/test/e2e/client.test.ts',
  '**/test/e2e/burst.test.ts',
  '**/test/local/demo/page.test.ts',
];
const POSTGRES_ONLY = ['**/test/e2e/postgres-faults.test.ts'];

module.exports = {
  // Global options (jest reads these at the root, not per project).
  maxWorkers: 2,
  testTimeout: 30_000,
  projects: [
    {
      ...base,
      displayName: 'dynamodb',
      testMatch: ['**/*.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', ...POSTGRES_ONLY.map((glob) => glob.replace('**', ''))],
    },
    {
      ...base,
      displayName: 'postgres',
      testMatch: [...ON_BOTH_STORES, ...POSTGRES_ONLY],
      setupFiles: ['<rootDir>/test/support/e2e-on-postgres.ts'],
    },
  ],
};
