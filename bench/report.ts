import type { Calibration, CalibrationRow } from './calibration';
import { BUNDLE_LABELS, type BundleResult, type ColdStartResult } from './cold-start';
import type { ExpiryResult } from './expiry';
import type { HttpResult } from './http';
import type { ItemSizes } from './item-sizes';
import type { Machine } from './machine';
import type { OrdersResult } from './orders';
import { isDuplicatePath, PATH_LABELS } from './paths';
import { ASSUMPTIONS } from './projection';
import { REDIS_VARIANTS, type RedisResult } from './redis';
import type { ScaleResult } from './scale';
import type { SettlementResult } from './settlement';
import { OUTSIDE_CALL_MS, STORE_VARIANT_LABELS, type StoresResult } from './stores';
import type { StormSummary } from './storm';
import type { SustainedResult } from './sustained';
import type { CorrectnessCheck, PathRow, TargetCheck } from './targets';
import { VARIANT_LABELS } from './variants';

/** Everything one run measured: what is printed, and what bench/results/latest.json holds. */
export interface BenchReport {
  readonly machine: Machine;
  readonly settings: Readonly<Record<string, unknown>>;
  readonly durationSeconds: number;
  readonly calibration: Calibration;
  readonly paths: readonly PathRow[];
  readonly storms: readonly StormSummary[];
  readonly itemSizes: ItemSizes;
  readonly http: HttpResult | undefined;
  /** Absent from runs before it was measured here (it was a test until then), and when skipped. */
  readonly settlement?: SettlementResult;
  /** The stores side by side (PostgreSQL, the held transaction, DynamoDB); absent from earlier runs and when skipped. */
  readonly stores?: StoresResult;
  /** The Redis store beside Powertools' cache persistence layer; absent from earlier runs and when skipped. */
  readonly redis?: RedisResult;
  /** Cost as the table grows (BENCH_SKIP=scale) and expiry against an insert rate (BENCH_SKIP=expiry). */
  readonly scale?: ScaleResult;
  readonly expiry?: ExpiryResult;
  /** A 4-step order, as recovery points and as one handler; absent from earlier runs and when skipped. */
  readonly orders?: OrdersResult;
  /** A minute of closed-loop load per store over HTTP; absent from earlier runs and when skipped. */
  readonly sustained?: SustainedResult;
  readonly coldStart: ColdStartResult | undefined;
  readonly assumptions: typeof ASSUMPTIONS;
  readonly targets: readonly TargetCheck[];
  readonly correctness: readonly CorrectnessCheck[];
}

/**
 * How tables and headings are written: as the terminal report, or as Markdown, aligned, for bench/README.md to quote
 * (`npx tsx --conditions=keystone-source bench/markdown.ts [results.json]`). Set for the length of one render.
 */
let style: 'text' | 'markdown' = 'text';

export function renderReport(report: BenchReport, options: { readonly markdown?: boolean } = {}): string {
  style = options.markdown ? 'markdown' : 'text';
  try {
    return render(report);
  } finally {
    style = 'text';
  }
}

function render(report: BenchReport): string {
  const { machine, settings } = report;
  const out: string[] = [];
  out.push(
    `keystone-idempotency benchmark, ${machine.date} (commit ${machine.commit}${
      machine.uncommittedFiles ? `, plus ${machine.uncommittedFiles} uncommitted files` : ''
    })`,
    `${machine.nproc} CPUs (${machine.cpu}), ${machine.memoryGiB} GiB, ${machine.platform}, Node ${machine.node}, ` +
      `DynamoDB Local ${machine.dynamoDbLocal}, ${machine.java}`,
    `load average at the start ${machine.loadAverage.join(' / ')} (1 / 5 / 15 min); ` +
      `settings ${JSON.stringify(settings)}; took ${report.durationSeconds.toFixed(0)} s`,
    '',
  );

  const { put, refusedPut, transaction, refusedTransaction } = report.calibration;
  const bare: [string, CalibrationRow][] = [
    ['PutItem, conditional, new item', put],
    ['PutItem refused, ALL_OLD returned', refusedPut],
    ['TransactWriteItems, 2 puts', transaction],
    ['TransactWriteItems cancelled, ALL_OLD', refusedTransaction],
  ];
  out.push(
    heading('DynamoDB Local on this machine: the bare requests, no library logic (calibration)'),
    table(
      ['request', 'p50 one at a time', 'p99', 'per second, 50 in flight'],
      bare.map(([name, row]) => [
        name,
        ms(row.sequentialMs.p50),
        ms(row.sequentialMs.p99),
        row.concurrentPerSecond.toFixed(0),
      ]),
    ),
    'DynamoDB Local serializes transactions: they do not scale with concurrency, single-item writes do.',
    '',
  );

  out.push(
    heading(`Per call against DynamoDB Local: ${settings.calls} calls per variant and path, interleaved`),
    table(
      [
        'path',
        'variant',
        'DynamoDB requests',
        'limit',
        'WRU',
        'p50',
        'p99',
        'p50 vs baseline [95% CI]',
        'vs Powertools',
      ],
      report.paths.map((row) => [
        PATH_LABELS[row.path],
        variantLabel(row),
        `${requests(row)}: ${row.cost.mix}`,
        String(requestLimit(row)),
        units(row.cost.units.write, row.cost.unitSources),
        ms(row.p50),
        ms(row.p99),
        `${row.ratio.toFixed(2)}x [${row.ratioInterval.low.toFixed(2)}-${row.ratioInterval.high.toFixed(2)}]`,
        row.vsPowertools ? `${row.vsPowertools.ratio.toFixed(2)}x` : '',
      ]),
    ),
    'limit: the fewest requests that can do it: a duplicate is one conditional write that fails and returns the ' +
      'record; a first request with an outside effect needs its claim durable before the effect and its completion ' +
      'after (2); a purely local one can do all in one transaction (1). On the outside-effect-only path the ' +
      'baseline does its usual charge and PutItem: the reference write, not the same work.',
    'WRU per call: reported by DynamoDB Local for requests that succeed; for refused ones (it reports nothing) ' +
      'modeled from the pricing rules (~), or a modeled upper bound for a cancelled transaction (<=).',
    '',
  );

  const { prices, latencyMs } = ASSUMPTIONS;
  out.push(
    heading(
      `Projection to DynamoDB (assumed ${latencyMs.singleItem} ms per single-item request, ${latencyMs.TransactWriteItems} ms per transaction; ` +
        `${prices.region} on-demand $${prices.usdPerMillionWriteRequestUnits}/M WRU, $${prices.usdPerMillionReadRequestUnits}/M RRU as of ${prices.asOf})`,
    ),
    table(
      ['path', 'variant', 'requests', 'projected DynamoDB time', 'WRU', '$ per million calls'],
      report.paths.map((row) => [
        PATH_LABELS[row.path],
        variantLabel(row),
        requests(row),
        ms(row.cost.projectedMs),
        units(row.cost.units.write, row.cost.unitSources),
        `$${row.cost.usdPerMillionCalls.toFixed(3)}`,
      ]),
    ),
    '',
  );

  out.push(
    heading(
      `Duplicate storm: ${settings.stormCalls} calls over ${settings.stormKeys} keys, ${settings.stormConcurrency} in flight, ` +
        `${settings.stormRounds} interleaved rounds`,
    ),
    table(
      ['variant', 'wall (median)', 'rounds', 'effects (rows)', 'processor calls', 'outcomes', 'requests/round', ''],
      report.storms.map((storm) => [
        VARIANT_LABELS[storm.variant],
        ms(storm.medianWallMs),
        storm.wallMs.map((wall) => wall.toFixed(0)).join(' / '),
        storm.rows.join(' / '),
        storm.externalEffect ? storm.effectCalls.join(' / ') : 'none (local)',
        Object.entries(storm.outcomes)
          .map(([kind, count]) => `${kind} ${count}`)
          .join(', '),
        storm.dynamoDbRequestsPerRound.toFixed(0),
        storm.variant === 'baseline' ? '(no idempotency)' : storm.allCorrect ? 'ok' : 'FAIL',
      ]),
    ),
    '',
  );

  if (report.stores) out.push(...storesSection(report.stores));
  if (report.redis) out.push(...redisSection(report.redis));
  if (report.scale) out.push(...scaleSection(report.scale));
  if (report.expiry) out.push(...expirySection(report.expiry));

  if (report.http) {
    out.push(
      heading('End to end over HTTP (autocannon, local API Gateway + Lambda authorizer + handler + sandbox processor)'),
      table(
        [
          'scenario',
          'API',
          'requests',
          'connections',
          'req/s',
          'p50',
          'p99',
          'statuses',
          'replayed',
          'charges',
          'CPU/request: Node + DynamoDB Local',
        ],
        report.http.results.map((result) => [
          result.scenario,
          result.api,
          String(result.requests),
          String(result.connections),
          result.requestsPerSecond.toFixed(0),
          ms(result.latencyMs.p50),
          ms(result.latencyMs.p99),
          Object.entries(result.statuses)
            .map(([status, count]) => `${status}x${count}`)
            .join(' '),
          String(result.replayed),
          String(result.charges),
          `${ms(result.cpuMsPerRequest.node)} + ${
            result.cpuMsPerRequest.dynamoDb === undefined ? 'n/a' : ms(result.cpuMsPerRequest.dynamoDb)
          }`,
        ]),
      ),
      '',
    );
  }

  if (report.settlement) {
    const { burst, earlyEvent } = report.settlement;
    out.push(
      heading(
        'Settlement: charge to settled, through the signed event, the webhook receiver, the queue and the consumer',
      ),
      table(
        ['case', 'payments', 'p50', 'p99', 'max', 'every one settled, one receipt'],
        [
          [
            `${burst.payments} at once`,
            String(burst.payments),
            ms(burst.chargeToSettledMs.p50),
            ms(burst.chargeToSettledMs.p99),
            ms(burst.chargeToSettledMs.max),
            burst.allSettledOnce ? 'yes' : 'NO',
          ],
          [
            `event before the payment (answer ${earlyEvent.answerDelayMs} ms after the charge)`,
            String(earlyEvent.chargeToSettledMs.count),
            ms(earlyEvent.chargeToSettledMs.p50),
            ms(earlyEvent.chargeToSettledMs.p99),
            ms(earlyEvent.chargeToSettledMs.max),
            '',
          ],
        ],
      ),
      '',
    );
  }

  if (report.orders) {
    const { calls, rows, everyOrderOnce } = report.orders;
    const label = { steps: 'recovery points (4 steps)', 'one-handler': 'one handler, one commit' } as const;
    out.push(
      heading(`A 4-step order (reserve, charge, ship, notify) in process, ${calls} orders per variant and path`),
      table(
        ['variant', 'path', 'DynamoDB requests', 'p50', 'p99'],
        rows.map((row) => [
          label[row.variant],
          row.path,
          String(row.requests),
          ms(row.latencyMs.p50),
          ms(row.latencyMs.p99),
        ]),
      ),
      everyOrderOnce ? '' : 'NOT every order was confirmed once: see the correctness checks.',
      '',
    );
  }

  if (report.sustained) {
    const { runs, probes } = report.sustained;
    const storeLabel = { dynamodb: 'DynamoDB Local', postgres: 'PostgreSQL' } as const;
    const mixLabel = { unique: 'every key new', 'half-repeated': 'half the requests repeat an answered key' } as const;
    out.push(
      heading(
        'Sustained load over HTTP: POST /payments on the local stack, closed loop, at the best probed concurrency',
      ),
      table(
        ['store', 'connections', 'req/s', 'p99'],
        probes.map((probe) => [
          storeLabel[probe.store],
          `${probe.connections} (probe)`,
          probe.requestsPerSecond.toFixed(0),
          ms(probe.p99),
        ]),
      ),
      '',
      table(
        [
          'store',
          'traffic',
          'connections',
          'seconds',
          'requests',
          'req/s',
          'p50',
          'p99',
          '5xx',
          'replays',
          'charges',
          'one per key',
        ],
        runs.map((run) => [
          storeLabel[run.store],
          mixLabel[run.mix],
          String(run.connections),
          run.durationSeconds.toFixed(1),
          String(run.requests),
          run.requestsPerSecond.toFixed(0),
          ms(run.latencyMs.p50),
          ms(run.latencyMs.p99),
          String(run.serverErrors),
          String(run.replayed),
          `${run.charges} (${run.chargedInFlight} cut off in flight)`,
          run.correct ? 'yes' : '**NO**',
        ]),
      ),
      '',
    );
  }

  if (report.coldStart) {
    const { bundles } = report.coldStart;
    const reference = bundles.find((bundle) => bundle.name === 'powertools');
    out.push(
      heading(
        `Cold start: esbuild as the CDK stack bundles (ESM, node22, minified, SDK bundled); import in ${settings.coldRuns} fresh processes each`,
      ),
      table(
        ['bundle', 'entry', 'bundle', 'gzip', 'source map', 'import median', 'import p99', 'vs Powertools equivalent'],
        bundles.map((bundle) => [
          BUNDLE_LABELS[bundle.name],
          bundle.entry,
          kb(bundle.bytes),
          kb(bundle.gzipBytes),
          kb(bundle.mapBytes),
          ms(bundle.importMs.median),
          ms(bundle.importMs.p99),
          reference && bundle !== reference
            ? `${(bundle.importMs.median / reference.importMs.median).toFixed(2)}x`
            : '',
        ]),
      ),
      "Bundled with the stack's own options (LAMBDA_BUNDLING in lib/infra/service-function.ts); prod's define " +
        '(lambdaBundling) for the traced bundle.',
      '',
      heading('What the payments function is made of (minified KB per package; this repository as one part)'),
      table(
        ['part', ...bundles.filter((bundle) => bundle.name.startsWith('ours')).map((b) => BUNDLE_LABELS[b.name])],
        partRows(bundles.filter((bundle) => bundle.name.startsWith('ours'))),
      ),
      '',
    );
  }

  out.push(
    heading('Reference targets'),
    table(
      ['target', 'goal', 'measured', 'anchor (same run)', ''],
      report.targets.map((check) => [
        check.target,
        check.goal,
        check.measured,
        check.anchor,
        check.met ? 'met' : check.withinNoise ? 'MISSED (within noise)' : 'MISSED',
      ]),
    ),
    '',
  );

  const failed = report.correctness.filter((check) => !check.passed);
  out.push(heading('Correctness'));
  if (failed.length === 0) out.push(`all ${report.correctness.length} assertions passed`);
  for (const check of failed) out.push(`FAIL  ${check.check}: ${check.detail}`);
  if (failed.length) out.push('', '!!!!!!!! CORRECTNESS FAILURE: the numbers above are not a valid result !!!!!!!!');
  return out.join('\n');
}

function redisSection(redis: RedisResult): string[] {
  const pathLabel = { first: 'first request', replay: 'replay', in_flight: 'in-flight duplicate' } as const;
  const ours = (path: string) => redis.rows.find((row) => row.variant === 'ours' && row.path === path);
  const powertools = (path: string) => redis.rows.find((row) => row.variant === 'powertools' && row.path === path);
  return [
    heading(
      `Redis: our store beside Powertools' cache persistence layer, one ${redis.server}, the same @redis/client; ` +
        `${redis.calls} calls per variant and path, interleaved; commands counted by a proxy (one round trip each)`,
    ),
    table(
      ['path', 'variant', 'commands', 'p50', 'p99', 'p50 vs Powertools'],
      redis.rows.map((row) => {
        const other = row.variant === 'ours' ? powertools(row.path) : undefined;
        return [
          pathLabel[row.path],
          REDIS_VARIANTS[row.variant],
          row.commands.min === row.commands.max ? String(row.commands.max) : `${row.commands.min}-${row.commands.max}`,
          ms(row.p50),
          ms(row.p99),
          other ? `${(row.p50 / other.p50).toFixed(2)}x` : '',
        ];
      }),
    ),
    '',
    heading("Redis duplicate storms: 1000 calls over 100 keys, 50 in flight, each key's effect (an INCR) once"),
    table(
      ['variant', 'wall time', 'commands', 'keys with one effect', ''],
      redis.storms.map((storm) => [
        REDIS_VARIANTS[storm.variant],
        ms(storm.wallMs),
        String(storm.commands),
        `${storm.keysWithOneEffect}/${storm.keys}`,
        storm.keysWithOneEffect === storm.keys && storm.errors.length === 0 ? 'ok' : 'FAIL',
      ]),
    ),
    `(ours stages the effect, run by the commit's script with the key's completion; Powertools' handler runs it itself, ` +
      `and its count includes that INCR. First request p50 ${ms(ours('first')?.p50 ?? Number.NaN)} against ` +
      `${ms(powertools('first')?.p50 ?? Number.NaN)}.)`,
    '',
  ];
}

function storesSection(stores: StoresResult): string[] {
  const summary = (values: readonly number[], digits = 0) => values.map((value) => value.toFixed(digits)).join(' / ');
  const pathLabel = { first: 'first request', replay: 'replay', in_flight: 'in-flight duplicate' } as const;
  return [
    heading(
      `The stores side by side: PostgreSQL ${stores.postgres}, the design documents' held transaction, DynamoDB Local; ` +
        `${stores.calls} calls per variant and path, interleaved`,
    ),
    table(
      [
        'path',
        'variant',
        'round trips',
        'p50',
        'p99',
        'vs held transaction',
        'connections held across the outside call',
      ],
      stores.rows.map((row) => [
        pathLabel[row.path],
        STORE_VARIANT_LABELS[row.variant],
        row.roundTrips.min === row.roundTrips.max
          ? String(row.roundTrips.max)
          : `${row.roundTrips.mean.toFixed(2)} (${row.roundTrips.min}-${row.roundTrips.max})`,
        ms(row.latencyMs.p50),
        ms(row.latencyMs.p99),
        vsHeld(stores, row),
        row.heldAcrossCall === undefined ? '' : String(row.heldAcrossCall),
      ]),
    ),
    'Round trips: PostgreSQL counted on the client socket (writes after a read), DynamoDB as HTTP requests. The outside ' +
      'call is a no-op here. The held transaction has no in-flight duplicate of its own: it waits on the key until ' +
      'the original commits (the storm shows for how long).',
    '',
    ...networkSection(stores),
    heading(
      `The stores' duplicate storms: 1000 calls over 100 keys, 50 in flight, pools of ${stores.poolMax}; ` +
        `with the local effect, then with a ${OUTSIDE_CALL_MS} ms outside call`,
    ),
    table(
      [
        'storm',
        'variant',
        'wall (median)',
        'rounds',
        'effects (rows / charges)',
        'outcomes',
        'round trips per call',
        'connection-ms per call',
        'connections held: mean; peak; peak waiting',
        'held across the call',
        'first p50 / p99',
        'duplicate p50 / p99',
        '',
      ],
      stores.storms.map((storm) => [
        storm.kind === 'outside' ? `${storm.outsideCallMs} ms outside call` : 'local effect',
        STORE_VARIANT_LABELS[storm.variant],
        ms(storm.medianWallMs),
        summary(storm.wallMs),
        `${storm.rows.join('/')} / ${storm.kind === 'outside' ? storm.effectCalls.join('/') : 'none'}`,
        Object.entries(storm.outcomes)
          .map(([kind, count]) => `${kind} ${count}`)
          .join(', '),
        storm.roundTripsPerCall.toFixed(2),
        storm.connectionMsPerCall === undefined ? 'n/a (HTTP)' : storm.connectionMsPerCall.toFixed(1),
        storm.peakHeld
          ? `${summary(storm.meanHeld ?? [], 1)}; ${summary(storm.peakHeld)}; ${summary(storm.peakWaiting ?? [])}`
          : 'n/a (HTTP)',
        storm.heldAcrossCall === undefined ? '' : String(storm.heldAcrossCall),
        `${ms(storm.firstMs.p50)} / ${ms(storm.firstMs.p99)}`,
        `${ms(storm.duplicateMs.p50)} / ${ms(storm.duplicateMs.p99)}`,
        storm.correct ? 'ok' : 'FAIL',
      ]),
    ),
    '',
  ];
}

function scaleSection(scale: ScaleResult): string[] {
  const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
  const pg = scale.postgres;
  const per = (bytes: number) => `${(bytes / pg.records).toFixed(0)} B`;
  const rows = [
    ...pg.steps.map((step) => ({ store: 'PostgreSQL', step })),
    ...(scale.dynamodb?.steps ?? []).map((step) => ({ store: 'DynamoDB Local', step })),
  ];
  const ddb = scale.dynamodb;
  return [
    heading(
      `As the table grows: live records loaded, then ${scale.calls} first requests and replays of random loaded keys`,
    ),
    table(
      ['store', 'records', 'load', 'first p50 / p99', 'replay p50 / p99', 'WAL per first request'],
      rows.map(({ store, step }) => [
        store,
        step.records.toLocaleString('en-US'),
        `${(step.loadMs / 1000).toFixed(1)} s`,
        `${ms(step.first.p50)} / ${ms(step.first.p99)}`,
        `${ms(step.replay.p50)} / ${ms(step.replay.p99)}`,
        step.walBytesPerFirst === undefined ? '' : `${step.walBytesPerFirst.toFixed(0)} B`,
      ]),
    ),
    ddb?.stoppedAt
      ? `DynamoDB Local loaded ${ddb.itemsPerSecond.toFixed(0)} items/s and stopped at ${ddb.stoppedAt.loaded.toLocaleString('en-US')} of ${ddb.stoppedAt.size.toLocaleString('en-US')} records: its ${ddb.stoppedAt.budgetSeconds} s budget ran out.`
      : '',
    `PostgreSQL at ${pg.records.toLocaleString('en-US')} records: table ${mb(pg.bytes.table)} (${per(pg.bytes.table)} a record), ` +
      `primary key ${mb(pg.bytes.primaryKey)} (${per(pg.bytes.primaryKey)} an entry), expiry index ${mb(pg.bytes.expiryIndex)} (${per(pg.bytes.expiryIndex)} an entry).` +
      (ddb
        ? ` DynamoDB: ${ddb.itemBytes} B an item by its size rule (plus 100 B of overhead billed for storage).`
        : ''),
    `A million live keys at rest: PostgreSQL ${mb(scale.perMillion.postgresBytes)}, $${scale.perMillion.postgresUsdPerMonth.toFixed(3)}/month (gp3); ` +
      `DynamoDB ${mb(scale.perMillion.dynamodbBytes)}, $${scale.perMillion.dynamodbUsdPerMonth.toFixed(3)}/month (Standard); ` +
      `each record's write ${scale.perMillion.dynamodbWriteUnitsPerRecord} WCU on DynamoDB (a transaction doubles it).`,
    '',
  ];
}

function expirySection(expiry: ExpiryResult): string[] {
  const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
  return [
    heading(
      `Expiry on PostgreSQL: ${expiry.insertRate.achieved.toFixed(0)} first requests/s, ${expiry.ttlSeconds} s TTL, purge every second, ${expiry.durationSeconds.toFixed(0)} s`,
    ),
    table(
      ['at', 'live', 'dead', 'table', 'indexes', 'inserted', 'purged', 'purge time', 'first p50 / p99', 'autovacuums'],
      expiry.windows.map((w) => [
        `${w.atSeconds.toFixed(0)} s`,
        String(w.liveRows),
        String(w.deadRows),
        mb(w.tableBytes),
        mb(w.indexBytes),
        String(w.inserted),
        String(w.purged),
        `${w.purgeMs.toFixed(0)} ms`,
        `${ms(w.firstMs.p50)} / ${ms(w.firstMs.p99)}`,
        String(w.autovacuums),
      ]),
    ),
    `Purge capacity ${expiry.purgeRowsPerSecond.toFixed(0)} rows per second of purging. Autovacuum on the table: ${Object.entries(
      expiry.autovacuum,
    )
      .map(([name, value]) => `${name} = ${value}`)
      .join(', ')}.`,
    '',
  ];
}

/** The PostgreSQL variants through the latency proxy, per one-way delay. */
function networkSection(stores: StoresResult): string[] {
  if (!stores.network?.length) return [];
  const pathLabel = { first: 'first request', replay: 'replay', in_flight: 'in-flight duplicate' } as const;
  return [
    heading(
      `PostgreSQL over a network: a latency proxy on the wire, ${stores.network[0]?.calls ?? 0} calls per variant and path, interleaved`,
    ),
    table(
      ['each way', 'round trip (direct)', 'path', 'variant', 'round trips', 'p50', 'p99', 'vs held transaction'],
      stores.network.flatMap((run) =>
        run.rows.map((row) => [
          `+${run.oneWayMs} ms`,
          `${ms(run.roundTripMs.proxied)} (${ms(run.roundTripMs.direct)})`,
          pathLabel[row.path],
          STORE_VARIANT_LABELS[row.variant],
          row.roundTrips.min === row.roundTrips.max ? String(row.roundTrips.max) : row.roundTrips.mean.toFixed(2),
          ms(row.latencyMs.p50),
          ms(row.latencyMs.p99),
          vsHeld({ ...stores, rows: run.rows }, row),
        ]),
      ),
    ),
    "Round trip: a bare SELECT 1's p50 through the proxy; Node's timers round a delay under 1 ms up to about 1 ms.",
    '',
  ];
}

/** p50 over the held transaction's, same form (local or outside) and path, PostgreSQL store only. */
function vsHeld(stores: StoresResult, row: StoresResult['rows'][number]): string {
  if (!row.variant.startsWith('pg-')) return '';
  const reference = row.variant === 'pg-local' ? 'document-local' : 'document-external';
  const held = stores.rows.find((r) => r.variant === reference && r.path === row.path);
  return held ? `${(row.latencyMs.p50 / held.latencyMs.p50).toFixed(2)}x` : '';
}

/** The fewest DynamoDB requests that can serve the call (the baseline: the one write it does). */
function requestLimit(row: PathRow): number {
  if (isDuplicatePath(row.path) || row.variant === 'baseline') return 1;
  return row.variant === 'ours-local' ? 1 : 2;
}

/**
 * On a duplicate path the baseline has no idempotency to consult: it does the work (and writes a payment) again. On
 * the outside-effect-only path it still writes its row: it is there as the reference write.
 */
function variantLabel(row: PathRow): string {
  if (row.variant !== 'baseline') return VARIANT_LABELS[row.variant];
  if (row.path === 'first_outside') return 'baseline: charge + PutItem (reference)';
  return isDuplicatePath(row.path) ? 'baseline: does it all again' : VARIANT_LABELS[row.variant];
}

/** The largest parts of any of the bundles, then everything else, then the total: one row per part. */
function partRows(bundles: readonly BundleResult[]): string[][] {
  const shown = new Set(bundles.flatMap((bundle) => bundle.parts.slice(0, 10).map((part) => part.name)));
  const bytesOf = (bundle: BundleResult, name: string) => bundle.parts.find((part) => part.name === name)?.bytes ?? 0;
  const largest = (name: string) => Math.max(...bundles.map((bundle) => bytesOf(bundle, name)));
  const order = [...shown].sort((a, b) => largest(b) - largest(a));
  const rows = order.map((name) => [name, ...bundles.map((bundle) => kb(bytesOf(bundle, name)))]);
  const rest = (bundle: BundleResult) =>
    bundle.parts.filter((part) => !shown.has(part.name)).reduce((sum, part) => sum + part.bytes, 0);
  rows.push(['everything else', ...bundles.map((bundle) => kb(rest(bundle)))]);
  rows.push([
    'sum of the parts',
    ...bundles.map((bundle) => kb(bundle.parts.reduce((sum, part) => sum + part.bytes, 0))),
  ]);
  return rows;
}

function heading(text: string): string {
  return style === 'markdown' ? `### ${text}` : `== ${text}`;
}

function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const cell = (text: string) => (style === 'markdown' ? text.replaceAll('|', '\\|') : text);
  const cells = [headers, ...rows].map((row) => headers.map((_, column) => cell(row[column] ?? '')));
  const widths = headers.map((_, column) =>
    Math.max(style === 'markdown' ? 3 : 0, ...cells.map((row) => (row[column] ?? '').length)),
  );
  const padded = (row: readonly string[]) => row.map((text, column) => text.padEnd(widths[column] ?? 0));
  const rule = widths.map((width) => '-'.repeat(width));
  if (style === 'markdown') {
    const line = (row: readonly string[]) => `| ${padded(row).join(' | ')} |`;
    return ['', line(cells[0] ?? []), line(rule), ...cells.slice(1).map(line), ''].join('\n');
  }
  const line = (row: readonly string[]) => padded(row).join('  ').trimEnd();
  return [line(cells[0] ?? []), line(rule), ...cells.slice(1).map(line)].join('\n');
}

function ms(value: number): string {
  return `${value.toFixed(2)} ms`;
}

function kb(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KB`;
}

function requests(row: PathRow): string {
  const { mean, min, max } = row.cost.requests;
  return min === max ? String(max) : `${mean.toFixed(2)} (${min}-${max})`;
}

function units(value: number, sources: readonly string[]): string {
  const mark = sources.includes('upper-bound') ? '<=' : sources.includes('modeled') ? '~' : '';
  return `${mark}${Number.isInteger(value) ? value : value.toFixed(2)}`;
}
