// @ts-check
/**
 * A Stryker reporter that keeps how long each mutated file took: the wall time from one mutant's result to the next,
 * counted to the file of the later one (one test runner at a time works through the mutants file by file, so that
 * is each mutant's run). Written to mutation/reports/<group>.timing.json for the report (mutation/report.ts); each
 * survivor is also written to <group>.survivors.txt as soon as it is known, to work on while the run goes on.
 */
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, relative } from 'node:path';
import { commonTokens, declareClassPlugin, PluginKind } from '@stryker-mutator/api/plugin';

class TimingReporter {
  static inject = /** @type {const} */ ([commonTokens.options]);
  /** @type {Record<string, number>} */
  seconds = {};
  last = Date.now();
  started = Date.now();

  /** @param {import('@stryker-mutator/api/core').StrykerOptions} options */
  constructor(options) {
    this.file = String(options.jsonReporter.fileName).replace(/\.json$/, '.timing.json');
    this.survivors = String(options.jsonReporter.fileName).replace(/\.json$/, '.survivors.txt');
    mkdirSync(dirname(this.file), { recursive: true });
    writeFileSync(this.survivors, '');
  }

  onMutationTestingPlanReady() {
    this.last = Date.now();
  }

  /** @param {import('@stryker-mutator/api/core').MutantResult} result */
  onMutantTested(result) {
    const now = Date.now();
    // Stryker names the file by its absolute path: kept relative to the repository, as the groups name it.
    const file = relative(process.cwd(), result.fileName);
    this.seconds[file] = (this.seconds[file] ?? 0) + (now - this.last) / 1000;
    this.last = now;
    if (result.status === 'Survived' || result.status === 'NoCoverage') {
      const { line, column } = result.location.start;
      const what = `${result.fileName}:${line}:${column} ${result.status} ${result.mutatorName} -> ${result.replacement}`;
      appendFileSync(this.survivors, `${what}\n`);
    }
  }

  wrapUp() {
    mkdirSync(dirname(this.file), { recursive: true });
    const total = (Date.now() - this.started) / 1000;
    writeFileSync(this.file, `${JSON.stringify({ total, files: this.seconds }, null, 2)}\n`);
  }
}

export const strykerPlugins = [declareClassPlugin(PluginKind.Reporter, 'timing', TimingReporter)];
