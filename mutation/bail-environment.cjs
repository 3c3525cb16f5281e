/**
 * jest's node environment, which during a mutant's run (Stryker sets __STRYKER_ACTIVE_MUTANT__) skips every case
 * after the first that fails: the mutant is killed, and the rest of its covering cases would only cost time. jest
 * bails per file at best; this bails per case, across files (the state is the process's: one runner, one mutant
 * at a time). The dry run, which measures each case's coverage, runs every case.
 */
const { TestEnvironment } = require('jest-environment-node');

const ACTIVE_MUTANT = '__STRYKER_ACTIVE_MUTANT__';
const killed = Symbol.for('keystone.mutation.killed');

class BailingEnvironment extends TestEnvironment {
  async handleTestEvent(event) {
    const mutant = process.env[ACTIVE_MUTANT];
    if (mutant === undefined) return;
    // A block not yet started is skipped whole, its hooks with it (no tables made for cases that won't run).
    if (event.name === 'run_describe_start' && process[killed] === mutant) event.describeBlock.mode = 'skip';
    if (event.name === 'test_start' && process[killed] === mutant) event.test.mode = 'skip';
    if (event.name === 'test_done' && event.test.errors.length > 0) process[killed] = mutant;
  }
}

module.exports = BailingEnvironment;
