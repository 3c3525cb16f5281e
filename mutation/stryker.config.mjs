// @ts-check
/**
 * Stryker over one group of mutation/groups.cjs (MUTATE_GROUP), run by mutation/run.ts, which starts DynamoDB Local
 * and PostgreSQL once for the whole run and passes their addresses on (DYNAMODB_ENDPOINT, POSTGRES_URL): jest's
 * global setup uses servers it is given. Per-test coverage runs each mutant against the cases that reach it only;
 * the incremental file (committed) keeps every result whose code and tests did not change.
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { groupNamed } = require('./groups.cjs');
const group = groupNamed(process.env.MUTATE_GROUP ?? '');

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  packageManager: 'npm',
  testRunner: 'jest',
  checkers: ['typescript'],
  tsconfigFile: 'mutation/tsconfig.json',
  typescriptChecker: { prioritizePerformanceOverAccuracy: true },
  jest: { projectType: 'custom', configFile: 'mutation/jest.config.cjs', enableFindRelatedTests: true },
  coverageAnalysis: 'perTest',
  mutate: group.mutate,
  incremental: true,
  incrementalFile: `mutation/incremental/${group.name}.json`,
  // A mutant killed only by a run outlasting three times its tests' own time, plus 10 s: a busy two-core machine
  // must not turn a slow case into a kill.
  timeoutFactor: 3,
  timeoutMS: 10_000,
  concurrency: Number(process.env.MUTATE_CONCURRENCY ?? 2),
  plugins: ['@stryker-mutator/*', './mutation/timing-reporter.mjs', './mutation/message-ignorer.mjs'],
  ignorers: ['error-messages'],
  reporters: ['json', 'timing', 'progress-append-only', 'clear-text'],
  jsonReporter: { fileName: `mutation/reports/${group.name}.json` },
  clearTextReporter: { allowColor: false, logTests: false, reportMutants: false, reportScoreTable: true },
  thresholds: { high: 95, low: 90, break: null },
  // A directory per group: two groups run side by side (and run.ts, stopping one, removes its sandbox only).
  tempDirName: `.stryker-tmp/${group.name}`,
  cleanTempDir: 'always',
  ignorePatterns: [
    '.stryker-tmp',
    'cdk.out',
    'mutation/reports',
    'mutation/incremental',
    '.tmp-burst',
    'packages/*/dist',
    'bench/results',
  ],
};
