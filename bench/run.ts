/**
 * `npm run bench`: idempotency measured side by side with Powertools and a no-idempotency baseline, on this machine.
 *
 * Starts its own DynamoDB Local (and kills its process group at the end, on error, and on Ctrl-C), then:
 *   1. calibrates DynamoDB Local (and warms its JVM);
 *   2. per call: four variants interleaved call by call, on four paths (first request, replay, in-flight duplicate,
 *      mismatch), with DynamoDB requests and capacity metered on each variant's client;
 *   3. a duplicate storm per variant, in interleaved rounds, asserting one effect per key;
 *   4. end to end over HTTP against the local stack, idempotency on and off;
 *   5. settlement: charge to settled through webhook, queue and consumer, for a burst and for early events;
 *   6. the stores side by side: the PostgreSQL store, the design documents' held-transaction `withIdempotency` and
 *      the DynamoDB store, per call and in the storm (with a local effect, and with a 200 ms outside call), against a
 *      throwaway PostgreSQL it starts too;
 *   7. Redis: the Redis store beside Powertools' cache persistence layer on one redis-server it starts (per call,
 *      and a 100-key storm);
 *   8. cold start: bundle size and import time of the payments function (on either store), next to a Powertools
 *      equivalent;
 *   9. a 4-step order (recovery points), first request and replay, beside the same order as one handler.
 * Prints a report, writes it to bench/results/latest.json (with a chart, latest.html, and its tables in Markdown,
 * latest.md), exits 1 only when a correctness assertion fails.
 *
 *   BENCH_CALLS=500          calls per variant and path          BENCH_WARMUP=50     unmeasured rounds first
 *   BENCH_STORM_ROUNDS=7     storms per variant                  BENCH_COLD_RUNS=10  fresh processes per bundle
 *   BENCH_HTTP_REQUESTS=1000 per API for first requests/replays  BENCH_HTTP_STORMS=10 50-way double taps per API
 *   BENCH_SETTLEMENT_BURST=50 payments settled at once           BENCH_SETTLEMENT_EARLY=5 early events, in turn
 *   BENCH_ORDER_CALLS=200    orders per variant and path         BENCH_SUSTAINED_SECONDS=60 per store and traffic
 *   BENCH_SKIP=http,settlement,postgres,redis,cold,orders  leave parts out (also: storm, rtt, scale, expiry,
 *                            sustained)
 *   BENCH_OUT=bench/results/latest.json  (latest.html and latest.md beside it)
 *   BENCH_PATHS=replay_cached  measure only these paths (default: every path)
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { type DynamoDbLocal, startDynamoDbLocal } from '@keystone-idempotency/local-aws/dynamodb-local';
import type { PostgresLocal } from '@keystone-idempotency/local-aws/postgres-local';
import { calibrate } from './calibration';
import { renderChart } from './chart';
import { type ColdStartResult, measureColdStart } from './cold-start';
import { type ExpiryResult, measureExpiry } from './expiry';
import { type HttpResult, measureHttp } from './http';
import { sampleItemSizes } from './item-sizes';
import { describeMachine } from './machine';
import { interleave, medianRatioInterval, now } from './measure';
import { measureOrders, type OrdersResult } from './orders';
import { measurePath, PATH_NAMES, type PathResult } from './paths';
import { ASSUMPTIONS, callCost } from './projection';
import { measureRedis, type RedisResult, redisCorrectness } from './redis';
import { type BenchReport, chartFile, markdownReport, renderReport } from './report';
import { measureScale, type ScaleResult } from './scale';
import { measureSettlement, type SettlementResult } from './settlement';
import { BENCH_AUTOVACUUM_NAPTIME_SECONDS, measureStores, type StoresResult, startBenchPostgres } from './stores';
import { DEFAULT_STORM, runStorm, type StormRun, summarizeStorms } from './storm';
import { measureSustained, type SustainedResult } from './sustained';
import { checkCorrectness, checkTargets, type PathRow } from './targets';
import { createVariants, POWERTOOLS_PEER } from './variants';

const settings = {
  calls: positive('BENCH_CALLS', 500),
  warmup: positive('BENCH_WARMUP', 50),
  calibrationOperations: 300,
  stormCalls: DEFAULT_STORM.calls,
  stormKeys: DEFAULT_STORM.keys,
  stormConcurrency: DEFAULT_STORM.concurrency,
  stormRounds: positive('BENCH_STORM_ROUNDS', 7),
  httpRequests: positive('BENCH_HTTP_REQUESTS', 1000),
  httpWarmup: 200,
  httpSlices: 4,
  httpConnections: 10,
  httpStorms: positive('BENCH_HTTP_STORMS', 10),
  httpStormWidth: 50,
  settlementBurst: positive('BENCH_SETTLEMENT_BURST', 50),
  settlementEarlyEvents: positive('BENCH_SETTLEMENT_EARLY', 5),
  coldRuns: positive('BENCH_COLD_RUNS', 10),
  orderCalls: positive('BENCH_ORDER_CALLS', 200),
  sustainedSeconds: positive('BENCH_SUSTAINED_SECONDS', 60),
  networkCalls: positive('BENCH_NETWORK_CALLS', 200),
  scaleCalls: positive('BENCH_SCALE_CALLS', 300),
  scaleDynamoDbSeconds: positive('BENCH_SCALE_DYNAMODB_SECONDS', 60),
  expirySeconds: positive('BENCH_EXPIRY_SECONDS', 150),
  expiryTtlSeconds: positive('BENCH_EXPIRY_TTL', 30),
  expiryRate: positive('BENCH_EXPIRY_RATE', 200),
  skip: list(process.env.BENCH_SKIP),
  paths: list(process.env.BENCH_PATHS),
};
const OUT = resolve(process.env.BENCH_OUT ?? resolve(__dirname, 'results', 'latest.json'));

async function main(): Promise<number> {
  const started = now();
  const machine = await describeMachine();
  const withPostgres = ['postgres', 'scale', 'expiry'].some((part) => !settings.skip.includes(part));
  console.log(
    `benchmark on ${machine.nproc} CPUs, Node ${machine.node}; starting DynamoDB Local${withPostgres ? ' and PostgreSQL' : ''}`,
  );
  const [db, postgres] = await Promise.all([
    startDynamoDbLocal(),
    withPostgres ? startBenchPostgres() : Promise.resolve(undefined),
  ]);
  const stopDb = stopOnExit(db, postgres);
  let paths: PathResult[] = [];
  const stormRuns: StormRun[] = [];
  let http: HttpResult | undefined;
  let settlement: SettlementResult | undefined;
  let stores: StoresResult | undefined;
  let scale: ScaleResult | undefined;
  let expiry: ExpiryResult | undefined;
  let orders: OrdersResult | undefined;
  let sustained: SustainedResult | undefined;
  let report: Omit<
    BenchReport,
    'coldStart' | 'settlement' | 'stores' | 'orders' | 'targets' | 'correctness' | 'durationSeconds'
  >;
  try {
    progress('calibrating DynamoDB Local');
    const calibration = await calibrate(db.endpoint, settings.calibrationOperations);
    const variants = await createVariants({ endpoint: db.endpoint });
    try {
      const unknown = settings.paths.filter((path) => !(PATH_NAMES as readonly string[]).includes(path));
      if (unknown.length > 0) throw new Error(`BENCH_PATHS: no path ${unknown.join(', ')} (${PATH_NAMES.join(', ')})`);
      for (const path of PATH_NAMES.filter((name) => settings.paths.length === 0 || settings.paths.includes(name))) {
        progress(`path: ${path}`);
        paths = paths.concat(
          await measurePath(path, variants, {
            calls: settings.calls,
            warmup: settings.warmup,
            accountId: 'acct_paths',
          }),
        );
      }
      if (!settings.skip.includes('storm')) {
        progress('duplicate storms');
        await interleave(variants, settings.stormRounds, async (variant, round) => {
          stormRuns.push(await runStorm(variant, { ...DEFAULT_STORM, round, accountId: `acct_storm_${round}` }));
        });
      }
      const itemSizes = await sampleItemSizes(variants);
      report = {
        machine,
        settings,
        calibration,
        paths: paths.map((result) => pathRow(result, paths)),
        storms: stormRuns.length > 0 ? summarizeStorms(stormRuns, variants) : [],
        itemSizes,
        http: undefined,
        assumptions: ASSUMPTIONS,
      };
    } finally {
      for (const variant of variants) variant.close();
    }
    if (postgres && !settings.skip.includes('postgres')) {
      progress('the stores side by side: PostgreSQL, the held transaction, DynamoDB');
      stores = await measureStores({
        postgresUrl: postgres.url,
        dynamoDbEndpoint: db.endpoint,
        calls: settings.calls,
        warmup: settings.warmup,
        stormRounds: settings.skip.includes('storm') ? 0 : settings.stormRounds,
        networkCalls: settings.skip.includes('rtt') ? 0 : settings.networkCalls,
      });
    }
    if (postgres && !settings.skip.includes('scale')) {
      progress('as the table grows: 10 thousand to 1 million live records');
      scale = await measureScale({
        postgresUrl: postgres.url,
        dynamoDbEndpoint: db.endpoint,
        calls: settings.scaleCalls,
        dynamoDbBudgetSeconds: settings.scaleDynamoDbSeconds,
      });
    }
    if (postgres && !settings.skip.includes('expiry')) {
      progress(`expiry against an insert rate (${settings.expirySeconds} s)`);
      expiry = await measureExpiry({
        postgresUrl: postgres.url,
        durationSeconds: settings.expirySeconds,
        ttlSeconds: settings.expiryTtlSeconds,
        insertRate: settings.expiryRate,
        autovacuumNaptimeSeconds: BENCH_AUTOVACUUM_NAPTIME_SECONDS,
      });
    }
    if (!settings.skip.includes('http')) {
      progress('HTTP end to end');
      http = await measureHttp({
        dynamoDbEndpoint: db.endpoint,
        dynamoDbPid: db.pid,
        requests: settings.httpRequests,
        warmup: settings.httpWarmup,
        slices: settings.httpSlices,
        connections: settings.httpConnections,
        stormRounds: settings.httpStorms,
        stormWidth: settings.httpStormWidth,
      });
    }
    if (!settings.skip.includes('settlement')) {
      progress('settlement');
      settlement = await measureSettlement({
        dynamoDbEndpoint: db.endpoint,
        burst: settings.settlementBurst,
        earlyEvents: settings.settlementEarlyEvents,
      });
    }
    if (!settings.skip.includes('orders')) {
      progress('a 4-step order: recovery points beside one handler');
      orders = await measureOrders({ dynamoDbEndpoint: db.endpoint, calls: settings.orderCalls });
    }
    if (!settings.skip.includes('sustained')) {
      progress(`sustained load over HTTP: ${settings.sustainedSeconds} s per store and traffic`);
      sustained = await measureSustained({
        dynamoDbEndpoint: db.endpoint,
        durationSeconds: settings.sustainedSeconds,
        probeConnections: [4, 8, 16, 32],
        probeSeconds: 5,
      });
    }
  } finally {
    await stopDb();
  }
  let redis: RedisResult | undefined;
  if (!settings.skip.includes('redis')) {
    progress("Redis: the Redis store beside Powertools' cache persistence layer");
    redis = await measureRedis({ calls: settings.calls, warmup: settings.warmup, stormRounds: settings.stormRounds });
  }
  let coldStart: ColdStartResult | undefined;
  if (!settings.skip.includes('cold')) {
    progress('cold start');
    coldStart = await measureColdStart({ runs: settings.coldRuns });
  }
  const full: BenchReport = {
    ...report,
    http,
    settlement,
    stores,
    redis,
    orders,
    ...(sustained ? { sustained } : {}),
    ...(scale ? { scale } : {}),
    ...(expiry ? { expiry } : {}),
    coldStart,
    durationSeconds: (now() - started) / 1000,
    targets: checkTargets(report.paths, report.storms, coldStart, settlement, stores, { scale, expiry }),
    correctness: [
      ...checkCorrectness(report.paths, report.storms, http, settlement, stores, { scale, expiry }),
      ...(redis ? redisCorrectness(redis) : []),
      ...(sustained
        ? sustained.runs.map((run) => ({
            check: `sustained load, ${run.store}, ${run.mix}: no 5xx and exactly one charge per key`,
            passed: run.correct,
            detail: `${run.requests} requests, ${run.serverErrors} 5xx, ${run.charges} charges, ${run.chargedTwice} keys charged twice`,
          }))
        : []),
      ...(orders
        ? [
            {
              check: 'a 4-step order: every first request confirmed, with one charge, shipment and email per order',
              passed: orders.everyOrderOnce,
              detail: `${orders.calls} orders per variant, shipments counted by reference in the sandbox`,
            },
          ]
        : []),
    ],
  };
  console.log(`\n${renderReport(full)}`);
  await mkdir(dirname(OUT), { recursive: true });
  await writeFile(OUT, `${JSON.stringify(full, null, 2)}\n`);
  const chart = chartFile(OUT);
  await writeFile(chart, renderChart(full));
  const tables = markdownReport(full, OUT);
  await writeFile(tables.file, tables.text);
  console.log(`\nwritten to ${OUT}, ${chart} and ${tables.file}`);
  return full.correctness.every((check) => check.passed) ? 0 : 1;
}

/**
 * Ratios are taken against the baseline, and against the Powertools variant on the same kind of table
 * (`POWERTOOLS_PEER`), measured in the same interleaved rounds.
 */
function pathRow(result: PathResult, all: readonly PathResult[]): PathRow {
  const peer = (variant: string) => all.find((p) => p.variant === variant && p.path === result.path);
  const baseline = peer('baseline') as PathResult;
  const peerName = POWERTOOLS_PEER[result.variant];
  const powertools = peerName ? peer(peerName) : undefined;
  const against = (other: PathResult) => ({
    ratio: result.latencyMs.p50 / other.latencyMs.p50,
    interval: medianRatioInterval(result.samples, other.samples),
  });
  return {
    variant: result.variant,
    path: result.path,
    p50: result.latencyMs.p50,
    p99: result.latencyMs.p99,
    ratio: result.latencyMs.p50 / baseline.latencyMs.p50,
    ratioInterval: medianRatioInterval(result.samples, baseline.samples),
    ...(powertools ? { vsPowertools: { ...against(powertools), peer: powertools.variant } } : {}),
    cost: callCost(result.calls),
    unexpected: result.unexpected as Record<string, number>,
    effectRuns: result.effectRuns,
  };
}

/**
 * DynamoDB Local (a JVM) and PostgreSQL each run in a process group of their own: stop them however this process
 * ends. Ctrl-C and SIGTERM stop them and exit 130; a plain exit (including a crash) kills the groups synchronously.
 * (If this process is SIGKILLed, the watchers that startDynamoDbLocal and startPostgresLocal spawn reap them.)
 */
function stopOnExit(db: DynamoDbLocal, postgres: PostgresLocal | undefined): () => Promise<void> {
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await Promise.all([db.stop(), postgres?.stop()]);
  };
  const onSignal = (signal: NodeJS.Signals) => {
    console.error(`\n${signal}: stopping DynamoDB Local${postgres ? ' and PostgreSQL' : ''}`);
    stop().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('exit', () => {
    if (stopped) return;
    for (const pid of [db.pid, postgres?.pid]) {
      if (pid === undefined) continue;
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
  return stop;
}

function progress(message: string): void {
  console.log(`  ${message}...`);
}

function list(raw: string | undefined): string[] {
  return (raw ?? '')
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean);
}

function positive(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer, got ${raw}`);
  return value;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error('benchmark failed:', error);
    process.exit(1);
  },
);
