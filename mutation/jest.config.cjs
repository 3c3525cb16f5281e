/**
 * The jest config Stryker runs (mutation/stryker.config.mjs): the repository's own (jest.config.js), one project,
 * only the group's test files. Stryker runs it in a sandbox copy of the repository, where the package's name would
 * still resolve to the checkout's own sources (node_modules links the workspace there): the mapper below points
 * `keystone-idempotency` and its entry points at the sandbox's, mutated, copy.
 */
const path = require('node:path');
const repository = require('../jest.config.js');
const manifest = require('../packages/keystone-idempotency/package.json');
const { groupNamed } = require('./groups.cjs');

const [project] = repository.projects;
const group = groupNamed(process.env.MUTATE_GROUP ?? '');

const entryPoints = Object.fromEntries(
  Object.entries(manifest.exports)
    .filter(([, target]) => typeof target === 'object')
    .map(([subpath, target]) => [
      `^keystone-idempotency${subpath === '.' ? '' : subpath.slice(1)}$`,
      `<rootDir>/packages/keystone-idempotency/${target['keystone-source'].slice(2)}`,
    ]),
);

const { displayName, testPathIgnorePatterns, ...base } = project;
module.exports = {
  ...base,
  rootDir: path.resolve(__dirname, '..'),
  testTimeout: repository.testTimeout,
  testMatch: group.tests.map((file) => `<rootDir>/${file}`),
  moduleNameMapper: { ...entryPoints, ...base.moduleNameMapper },
  setupFiles: ['<rootDir>/mutation/model-seed.cjs'],
  // Absolute: Stryker loads the environment itself, from the path as written.
  testEnvironment: path.join(__dirname, 'bail-environment.cjs'),
  testSequencer: path.join(__dirname, 'sequencer.cjs'),
};
