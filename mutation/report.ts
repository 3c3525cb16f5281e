import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Equivalent, equivalents } from './equivalent';

/**
 * bench/results/mutation.md from the groups' last Stryker reports (mutation/reports/<group>.json and .timing.json,
 * which the incremental files carry from run to run) and the reasoned equivalent mutants (mutation/equivalent.ts):
 * per file, mutants, killed (timeouts among them), survivors, equivalents, no coverage, score and time.
 */
const root = join(__dirname, '..');
export const THRESHOLD = 90;

interface Mutant {
  readonly id: string;
  readonly mutatorName: string;
  readonly replacement?: string;
  readonly status: string;
  readonly location: { start: { line: number; column: number }; end: { line: number; column: number } };
  readonly killedBy?: string[];
  readonly coveredBy?: string[];
}
interface Report {
  readonly files: Record<string, { source: string; mutants: Mutant[] }>;
  readonly testFiles?: Record<string, { tests: { id: string; name: string }[] }>;
}
interface Timings {
  readonly total: number;
  readonly files: Record<string, number>;
}
interface GroupTimings {
  full?: { seconds: number; date: string; commit: string };
  incremental?: { seconds: number; date: string; commit: string; reused: string };
}

/** The source text a mutant replaces (Stryker's lines are 1-based, columns 0-based... and 1-based in the schema). */
function originalOf(source: string, mutant: Mutant): string {
  const lines = source.split('\n');
  const { start, end } = mutant.location;
  if (start.line === end.line) return (lines[start.line - 1] ?? '').slice(start.column - 1, end.column - 1);
  const first = (lines[start.line - 1] ?? '').slice(start.column - 1);
  const middle = lines.slice(start.line, end.line - 1);
  const last = (lines[end.line - 1] ?? '').slice(0, end.column - 1);
  return [first, ...middle, last].join('\n');
}

const matches = (file: string, source: string, mutant: Mutant) => (e: Equivalent) =>
  e.file === file &&
  e.mutator === mutant.mutatorName &&
  e.replacement === mutant.replacement &&
  e.original === originalOf(source, mutant);

export interface FileRow {
  readonly group: string;
  readonly file: string;
  readonly mutants: number;
  readonly killed: number;
  /** Killed by a case of the library's own tests, none of the published suites' having failed first. */
  readonly killedByOwnTests: number;
  readonly timedOut: number;
  readonly survived: number;
  readonly equivalent: number;
  readonly noCoverage: number;
  readonly compileErrors: number;
  readonly ignored: number;
  readonly score: number;
  readonly seconds: number | undefined;
  readonly unexplained: { line: number; mutator: string; original: string; replacement: string }[];
  readonly equivalents: { line: number; entry: Equivalent }[];
}

export function fileRows(): { rows: FileRow[]; stale: Equivalent[]; missing: string[] } {
  const { groups, suiteFiles } = require('./groups.cjs') as {
    groups: readonly { name: string; mutate: string[] }[];
    suiteFiles: string[];
  };
  const rows: FileRow[] = [];
  const used = new Set<Equivalent>();
  const missing: string[] = [];
  for (const group of groups) {
    const path = join(__dirname, 'incremental', `${group.name}.json`);
    if (!existsSync(path)) {
      missing.push(group.name);
      continue;
    }
    const report: Report = JSON.parse(readFileSync(path, 'utf8'));
    const suiteTests = new Set(
      Object.entries(report.testFiles ?? {})
        .filter(([testFile]) => suiteFiles.some((suite) => testFile.endsWith(suite)))
        .flatMap(([, { tests }]) => tests.map((test) => test.id)),
    );
    const timingPath = join(__dirname, 'incremental', `${group.name}.timing.json`);
    const timing: Timings | undefined = existsSync(timingPath)
      ? JSON.parse(readFileSync(timingPath, 'utf8'))
      : undefined;
    for (const file of group.mutate) {
      const result = report.files[file];
      if (!result) {
        missing.push(file);
        continue;
      }
      // As Stryker scores: a mutant that does not compile, or breaks its module before any case runs (RuntimeError:
      // `createHash('')` at load), or is ignored, is no mutant a case could kill or miss.
      const invalid = (m: { status: string }) => m.status === 'CompileError' || m.status === 'RuntimeError';
      const valid = result.mutants.filter((m) => !invalid(m) && m.status !== 'Ignored');
      const count = (status: string) => valid.filter((m) => m.status === status).length;
      const unexplained: FileRow['unexplained'] = [];
      const matched: FileRow['equivalents'] = [];
      let equivalent = 0;
      for (const mutant of valid.filter((m) => m.status === 'Survived' || m.status === 'NoCoverage')) {
        const entry = equivalents.find(matches(file, result.source, mutant));
        if (entry) {
          used.add(entry);
          equivalent++;
          matched.push({ line: mutant.location.start.line, entry });
        } else {
          unexplained.push({
            line: mutant.location.start.line,
            mutator: mutant.mutatorName,
            original: originalOf(result.source, mutant),
            replacement: mutant.replacement ?? '',
          });
        }
      }
      const killed = count('Killed');
      const killedByOwnTests = valid.filter(
        (m) => m.status === 'Killed' && !(m.killedBy ?? []).some((test) => suiteTests.has(test)),
      ).length;
      const timedOut = count('Timeout');
      rows.push({
        group: group.name,
        file,
        mutants: valid.length,
        killed,
        killedByOwnTests,
        timedOut,
        survived: count('Survived'),
        equivalent,
        noCoverage: count('NoCoverage'),
        compileErrors: result.mutants.filter(invalid).length,
        ignored: result.mutants.filter((m) => m.status === 'Ignored').length,
        score: valid.length === 0 ? 100 : (100 * (killed + timedOut)) / valid.length,
        seconds: timing?.files[file],
        unexplained,
        equivalents: matched,
      });
    }
  }
  return { rows, stale: equivalents.filter((e) => !used.has(e)), missing };
}

const duration = (seconds: number | undefined) => {
  if (seconds === undefined) return '';
  const s = Math.round(seconds);
  return s >= 3600
    ? `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`
    : s >= 60
      ? `${Math.floor(s / 60)} min ${s % 60} s`
      : `${s} s`;
};
const short = (text: string) => JSON.stringify(text.length > 80 ? `${text.slice(0, 77)}...` : text);

/** Writes the report; answers the files below the threshold (and the groups never run). */
export function writeMutationReport(path: string): { belowThreshold: string[] } {
  const { rows, stale, missing } = fileRows();
  const timings: Record<string, GroupTimings> = JSON.parse(readFileSync(join(__dirname, 'timings.json'), 'utf8'));
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root }).toString().trim();
  const lines: string[] = [
    '# Mutation testing: the drivers and the protocol against the published suites',
    '',
    `Written by \`npm run mutate\` (mutation/run.ts) at commit ${commit}, ${new Date().toISOString().slice(0, 10)}, from`,
    "each group's last results (mutation/incremental/). Stryker changes each file below one small way at a time (a",
    'condition dropped, a comparison flipped, a statement removed); a mutant is killed when a test fails on it. A',
    "driver's mutants meet the published suites on its real server first (the store contract and the protocol",
    "model), then the store's own tests of what no suite reaches; the engine's meet the suites on every store, then",
    "the engine's own tests (mutation/groups.cjs). A mutant's run stops at its first failing case, so a kill is",
    'credited to the suites whenever one of their cases fails on it: "by own tests" counts the others.',
    '',
    "- mutants: those that compile (Stryker's TypeScript checker drops the rest), load (one that breaks its module",
    "  before any case runs is left out, as Stryker scores) and change code, not an error message's wording",
    '  (mutation/message-ignorer.mjs); those left out are counted apart, in the last column;',
    '- killed: a test failed (or the run outlasted its time: timed out);',
    '- survived: no test failed; each is either listed in mutation/equivalent.ts with the reason it changes nothing a',
    '  caller can see (equivalent), or listed at the end of this page;',
    '- no coverage: no test reaches the code at all;',
    '- score: killed (timed out included) over mutants; at least 90 % in every file;',
    "- time: the wall time spent on the file in its group's last full run, on this two-core machine shared with",
    '  other work.',
    '',
    '| group | file | mutants | killed (timed out; by own tests) | survived | equivalent | no coverage | score | time | compile or load errors, message text |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.group} | \`${r.file.replace('packages/keystone-idempotency/', '')}\` | ${r.mutants} | ${r.killed + r.timedOut} (${r.timedOut}; ${r.killedByOwnTests}) | ${r.survived} | ${r.equivalent} | ${r.noCoverage} | ${r.score.toFixed(1)} % | ${duration(r.seconds)} | ${r.compileErrors}, ${r.ignored} |`,
    );
  }
  lines.push('');
  lines.push('## Run times', '', '| group | full run | incremental rerun |', '| --- | --- | --- |');
  for (const [group, t] of Object.entries(timings)) {
    const full = t.full ? `${duration(t.full.seconds)} (${t.full.date.slice(0, 10)}, ${t.full.commit})` : 'not yet';
    const incremental = t.incremental ? `${duration(t.incremental.seconds)} (${t.incremental.reused})` : 'not yet';
    lines.push(`| ${group} | ${full} | ${incremental} |`);
  }
  const equivalent = rows.flatMap((r) => r.equivalents.map((e) => ({ file: r.file, ...e })));
  if (equivalent.length > 0) {
    lines.push('', '## Equivalent mutants, and why each changes nothing', '');
    for (const { file, line, entry } of equivalent) {
      lines.push(
        `- \`${file.replace('packages/keystone-idempotency/', '')}\`:${line} ${entry.mutator}: ${short(entry.original)} -> ${short(entry.replacement)}. ${entry.reason}`,
      );
    }
  }
  const unexplained = rows.flatMap((r) => r.unexplained.map((u) => ({ file: r.file, ...u })));
  if (unexplained.length > 0) {
    lines.push('', '## Survivors not yet killed or reasoned equivalent', '');
    for (const u of unexplained) {
      lines.push(`- \`${u.file}\`:${u.line} ${u.mutator}: ${short(u.original)} -> ${short(u.replacement)}`);
    }
  }
  if (stale.length > 0) {
    lines.push('', '## Equivalents that match no survivor any more (remove them from mutation/equivalent.ts)', '');
    for (const e of stale) lines.push(`- \`${e.file}\` ${e.mutator}: ${short(e.original)} -> ${short(e.replacement)}`);
  }
  if (missing.length > 0) lines.push('', `Not run yet: ${missing.join(', ')}.`);
  writeFileSync(path, `${lines.join('\n')}\n`);
  return {
    belowThreshold: [...rows.filter((r) => r.score < THRESHOLD).map((r) => `${r.file}: ${r.score.toFixed(1)} %`)],
  };
}
