import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DynamoDbLocal } from '@keystone-idempotency/local-aws/dynamodb-local';
import type { PostgresLocal } from '@keystone-idempotency/local-aws/postgres-local';
import { startTestServers } from '../test/support/test-servers';
import { fileRows, THRESHOLD, writeMutationReport } from './report';

/**
 * `npm run mutate [-- group...]`: Stryker over each group of mutation/groups.cjs in turn (all by default),
 * incrementally against the committed results (mutation/incremental/), then the report (bench/results/mutation.md).
 * `--force` tests every mutant again; `--report` only writes the report again; `--survivors` prints each survivor
 * not yet explained as an entry for mutation/equivalent.ts; `--ci` is what `npm test` runs: a
 * group whose files are as its committed results recorded them is checked from those results (no mutant runs), one
 * whose files changed runs Stryker incrementally (only the mutants of what changed), and any file below the threshold
 * fails.
 *
 * DynamoDB Local and PostgreSQL start once, here, for every group and every mutant, when a group runs: their
 * addresses reach jest's global setup through the environment, which uses servers it is given. They are stopped when
 * the run ends, however it ends (and by the launchers' watchers if this process is killed outright).
 */
// Node 20.20 is supported here (see jest.config.js): the SDK's notice about Node 22 says nothing new.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const { groups } = require('./groups.cjs') as { groups: readonly { name: string; mutate: string[] }[] };
const root = join(__dirname, '..');
const args = process.argv.slice(2);
const force = args.includes('--force');
const reportOnly = args.includes('--report');
const ci = args.includes('--ci');
/**
 * What `--ci` may spend on Stryker runs of changed groups, in all: past it, the run stops and fails, and the change
 * is for `npm run mutate` on a developer's machine, its results committed.
 */
const CI_BUDGET_MS = Number(process.env.MUTATE_CI_BUDGET_MINUTES ?? 20) * 60_000;
const startedAt = Date.now();
const chosen = args.filter((arg) => !arg.startsWith('--'));
const names = chosen.length > 0 ? chosen : groups.map((group) => group.name);

/** The wall time of each group's last run, full and incremental: the report's timings. */
export interface GroupTimings {
  full?: { seconds: number; date: string; commit: string };
  incremental?: { seconds: number; date: string; commit: string; reused: string };
}
const TIMINGS = join(__dirname, 'timings.json');

let servers: Promise<(DynamoDbLocal | PostgresLocal | undefined)[]> | undefined;
/** The Stryker run under way, and its group: its sandbox (mutation/stryker.config.mjs) is the one to remove when stopped. */
let stryker: { child: ReturnType<typeof spawn>; group: string } | undefined;
const sandboxOf = (group: string) => join(root, '.stryker-tmp', group);

/** DynamoDB Local and PostgreSQL, started on first need (unless given) and kept for the rest of the run. */
function startServers() {
  servers ??= startTestServers();
  return servers;
}

async function stopServers(): Promise<void> {
  const started = servers ? await servers : [];
  await Promise.all(started.map((server) => server?.stop()));
}

/** On a signal: Stryker's process group and the servers, at once; and the sandbox Stryker had no time to remove. */
function killNow(started: readonly ({ pid: number } | undefined)[]): void {
  for (const pid of [stryker?.child.pid, ...started.map((server) => server?.pid)]) {
    try {
      if (pid) process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  if (stryker) rmSync(sandboxOf(stryker.group), { recursive: true, force: true });
}

/** One Stryker run of `group`: its exit code, and how many results the incremental file gave it. */
async function runStryker(group: string): Promise<{ code: number; reused: string | undefined }> {
  await startServers();
  // The model's random runs from one seed: a mutant meets the same runs each time (the report stays stable).
  process.env.MUTATE_MODEL_SEED ??= '20261206';
  // Ten runs of the model per mutant, not CI's fifty: a mutant covered by it pays a few seconds, not a minute. One
  // the model would kill only in a longer run survives here, and gets a case of the contract suite of its own.
  process.env.PROTOCOL_MODEL_RUNS ??= '10';
  return new Promise((resolve) => {
    const bin = join(root, 'node_modules/@stryker-mutator/core/bin/stryker.js');
    const child = spawn(process.execPath, [bin, 'run', 'mutation/stryker.config.mjs', ...(force ? ['--force'] : [])], {
      cwd: root,
      env: { ...process.env, MUTATE_GROUP: group },
      stdio: ['ignore', 'pipe', 'inherit'],
      detached: true,
    });
    stryker = { child, group };
    const budget = ci
      ? setTimeout(
          () => {
            console.error(
              `mutation: ${group} changed more than CI's ${CI_BUDGET_MS / 60_000} minutes of mutation testing cover: ` +
                `run npm run mutate -- ${group}, and commit mutation/incremental and bench/results/mutation.md`,
            );
            if (child.pid) process.kill(-child.pid, 'SIGKILL');
          },
          Math.max(0, CI_BUDGET_MS - (Date.now() - startedAt)),
        )
      : undefined;
    let reused: string | undefined;
    child.stdout?.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      process.stdout.write(text);
      const found = /(\d+)\D* of (\d+) mutant result\(s\) are reused/.exec(text);
      if (found) reused = `${found[1]} of ${found[2]} mutants reused`;
    });
    child.once('exit', (code, signal) => {
      clearTimeout(budget);
      stryker = undefined;
      // Killed (past CI's budget), it had no time to remove its sandbox.
      if (signal) rmSync(sandboxOf(group), { recursive: true, force: true });
      resolve({ code: code ?? (signal ? 1 : 0), reused });
    });
  });
}

/** Whether every file of `group` is as its committed results recorded it (so they hold as they are). */
function unchanged(group: { name: string; mutate: string[] }): boolean {
  const path = join(__dirname, 'incremental', `${group.name}.json`);
  if (!existsSync(path)) return false;
  const { files } = JSON.parse(readFileSync(path, 'utf8')) as { files: Record<string, { source: string }> };
  return group.mutate.every((file) => files[file]?.source === readFileSync(join(root, file), 'utf8'));
}

async function runGroup(name: string, timings: Record<string, GroupTimings>): Promise<boolean> {
  const started = Date.now();
  const { code, reused } = await runStryker(name);
  if (code !== 0) return false;
  const seconds = Math.round((Date.now() - started) / 1000);
  const date = new Date().toISOString();
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root }).toString().trim();
  const entry = timings[name] ?? {};
  timings[name] = entry;
  if (force || reused === undefined || reused.startsWith('0 of')) {
    entry.full = { seconds, date, commit };
    // Each file's time in this full run, kept beside the group's results for the report.
    copyFileSync(
      join(__dirname, 'reports', `${name}.timing.json`),
      join(__dirname, 'incremental', `${name}.timing.json`),
    );
  } else {
    entry.incremental = { seconds, date, commit, reused };
  }
  return true;
}

async function main(): Promise<number> {
  if (reportOnly) return report();
  if (args.includes('--survivors')) return survivors();
  const timings: Record<string, GroupTimings> = JSON.parse(readFileSync(TIMINGS, 'utf8'));
  for (const name of names) {
    const group = groups.find((candidate) => candidate.name === name);
    if (!group) throw new Error(`no mutation group "${name}": one of ${groups.map((g) => g.name).join(', ')}`);
    if (ci && !existsSync(join(__dirname, 'incremental', `${name}.json`))) {
      console.log(`mutation: ${name} has no committed results yet (npm run mutate -- ${name}); not checked`);
      continue;
    }
    if (ci && unchanged(group)) {
      console.log(`mutation: ${name} unchanged since its committed results; checked from them`);
      continue;
    }
    if (!(await runGroup(name, timings))) return 1;
    if (!ci) {
      // Read again: another group's run may have written its own timings since this one started.
      const latest: Record<string, GroupTimings> = JSON.parse(readFileSync(TIMINGS, 'utf8'));
      latest[name] = timings[name] ?? {};
      writeFileSync(TIMINGS, `${JSON.stringify(latest, null, 2)}\n`);
    }
  }
  return ci ? check() : report();
}

/** Writes bench/results/mutation.md: 1 when a file is below the threshold. */
function report(): number {
  mkdirSync(join(root, 'bench/results'), { recursive: true });
  const { belowThreshold } = writeMutationReport(join(root, 'bench/results/mutation.md'));
  for (const line of belowThreshold) console.error(`mutation: below ${THRESHOLD} %: ${line}`);
  return belowThreshold.length > 0 ? 1 : 0;
}

/** `--survivors`: each survivor left unexplained, as an entry of mutation/equivalent.ts waiting for its reason. */
function survivors(): number {
  for (const row of fileRows().rows) {
    for (const u of row.unexplained) {
      const entry = { file: row.file, mutator: u.mutator, original: u.original, replacement: u.replacement };
      console.log(`// line ${u.line}\n${JSON.stringify({ ...entry, reason: '' }, null, 2)},`);
    }
  }
  return 0;
}

/** What `--ci` holds every file to: the threshold, and (from committed results) no survivor left unexplained. */
function check(): number {
  const { rows } = fileRows();
  let failed = 0;
  for (const row of rows) {
    const name = `${row.file} (${row.group})`;
    if (row.score < THRESHOLD) {
      console.error(`mutation: ${name}: ${row.score.toFixed(1)} % of its mutants killed, below ${THRESHOLD} %`);
      failed++;
    }
    for (const u of row.unexplained) {
      console.error(`mutation: ${name}:${u.line} survives (${u.mutator}), neither killed nor reasoned equivalent`);
    }
  }
  const total = rows.reduce((sum, row) => sum + row.mutants, 0);
  console.log(`mutation: ${rows.length} files, ${total} mutants, ${failed} files below ${THRESHOLD} %`);
  return failed > 0 ? 1 : 0;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void (servers ?? Promise.resolve([])).then((started) => {
      killNow(started);
      process.exit(130);
    });
  });
}

main()
  .then(async (code) => {
    await stopServers();
    process.exit(code);
  })
  .catch(async (error: unknown) => {
    console.error(error);
    killNow(servers ? await servers : []);
    process.exit(1);
  });
