import { randomUUID } from 'node:crypto';
import { fingerprint, scopedKey } from 'keystone-idempotency/engine';
import { migrate, PostgresStore } from 'keystone-idempotency/postgres';
import { Pool } from 'pg';
import { type LatencySummary, now, summarize } from './measure';
import { CARD, OPERATION, paymentEvent, paymentOf } from './payment-flow';

/**
 * Issue 25 §2, expiry keeps up on PostgreSQL: first requests at a steady rate with a short TTL, and the store's
 * `purgeExpired` run every second beside them (as the scheduled completer runs it, only more often), for a few
 * minutes. Every window of {@link WINDOW_SECONDS} records the rows live and dead, the table's and its indexes'
 * sizes, what the purge deleted and how long it took, and the first requests' latency. Expiry keeps up when the
 * purge deletes as fast as rows expire, with time to spare (its capacity, rows deleted per second of purging, at
 * least 10x the insert rate), the sizes stop growing once the first records expire (the table holds a TTL's worth
 * of live rows, and vacuum hands the dead ones' space back for reuse), and the first requests' p99 is the same with
 * the purge deleting as before anything expired.
 *
 * The design is the store's own, measured as it is: batched deletes through the partial index on `expires_at`
 * (`purgeBatch`, `LIMIT` and `FOR UPDATE SKIP LOCKED`, each batch its own short transaction). Partitioning by
 * expiry period would make the purge a `DROP` of an old partition, with no dead rows at all, but a partitioned
 * table's unique keys must include the partition key: `(scope, key)` could then not be unique across periods,
 * and the claim's conflict on the primary key, which is the whole protocol, would be lost (a takeover or a
 * completion would also move the row between partitions). So: batched deletes, and autovacuum told to keep up.
 */

export interface ExpiryWindow {
  /** Seconds since the start, at the window's end. */
  readonly atSeconds: number;
  readonly liveRows: number;
  readonly deadRows: number;
  readonly tableBytes: number;
  readonly indexBytes: number;
  readonly inserted: number;
  readonly purged: number;
  /** Time spent in `purgeExpired` in this window (ms). */
  readonly purgeMs: number;
  readonly firstMs: LatencySummary;
  /** Autovacuum runs on the table so far. */
  readonly autovacuums: number;
}

export interface ExpiryResult {
  readonly durationSeconds: number;
  readonly ttlSeconds: number;
  /** Asked for, and achieved (first requests per second over the run). */
  readonly insertRate: { readonly target: number; readonly achieved: number };
  /** The autovacuum settings put on the table, as `ALTER TABLE ... SET (...)` takes them. */
  readonly autovacuum: Readonly<Record<string, string>>;
  readonly windows: readonly ExpiryWindow[];
  /** Rows deleted per second of purge time, over the run: what the purge could sustain. */
  readonly purgeRowsPerSecond: number;
  /** First requests before any record expired (no purge work), and once the purge deletes (the steady state). */
  readonly before: LatencySummary;
  readonly steady: LatencySummary;
  /**
   * The largest table + index size once steady (from two TTLs and an autovacuum nap on: see `measureExpiry`), over
   * the first steady window's.
   */
  readonly steadyGrowth: number;
  readonly errors: readonly string[];
}

export interface ExpiryOptions {
  readonly postgresUrl: string;
  readonly durationSeconds: number;
  readonly ttlSeconds: number;
  /** First requests per second. */
  readonly insertRate: number;
  /** The server's `autovacuum_naptime`, in seconds: when the sizes can be expected to settle. */
  readonly autovacuumNaptimeSeconds: number;
}

/** Per table, so that dead rows are reclaimed while they are a small share of a table this size. */
export const EXPIRY_AUTOVACUUM = {
  // The default, 20% of the table dead before a vacuum, lets a table whose whole content turns over every TTL carry
  // a fifth of a TTL's rows dead; a fixed threshold keeps that small whatever the table's size.
  autovacuum_vacuum_scale_factor: '0',
  autovacuum_vacuum_threshold: '5000',
  // Vacuum unthrottled on this table: its work is proportional to what the purge deleted, and a throttled vacuum
  // that falls behind is what lets the table grow.
  autovacuum_vacuum_cost_delay: '0',
  autovacuum_vacuum_insert_scale_factor: '0',
  autovacuum_vacuum_insert_threshold: '5000',
} as const;

export const WINDOW_SECONDS = 10;
const SCHEMA = 'bench_expiry';

export async function measureExpiry(options: ExpiryOptions): Promise<ExpiryResult> {
  const pool = new Pool({ connectionString: options.postgresUrl, pipeline: true, max: 8, idleTimeoutMillis: 0 });
  pool.on('error', () => undefined);
  const errors: string[] = [];
  const noteError = (error: unknown) => {
    if (errors.length < 5) errors.push(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
  };
  try {
    await pool.query(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
    await migrate(pool, { schema: SCHEMA });
    const table = `"${SCHEMA}".idempotency_keys`;
    const settings = Object.entries(EXPIRY_AUTOVACUUM)
      .map(([name, value]) => `${name} = ${value}`)
      .join(', ');
    await pool.query(`ALTER TABLE ${table} SET (${settings})`);
    const store = new PostgresStore({
      pool,
      schema: SCHEMA,
      leaseSeconds: Math.min(30, options.ttlSeconds),
      ttlSeconds: options.ttlSeconds,
    });
    const event = paymentEvent('acct_expiry', 'x', CARD);
    const print = fingerprint({ operation: OPERATION, body: event.body, contentType: event.headers['Content-Type'] });

    const started = now();
    const endAt = started + options.durationSeconds * 1000;
    let inserted = 0;
    let purged = 0;
    let purgeMs = 0;
    let firstMs: number[] = [];
    const allFirst: { at: number; ms: number }[] = [];
    let firstPurgeAt: number | undefined;

    // Inserts: paced to the target rate, each a one-shot first request with the payment's response.
    const insert = async (i: number) => {
      const account = `acct_expiry_${i % 100}`;
      const key = scopedKey({ accountId: account, operation: OPERATION, key: randomUUID() });
      const callStarted = now();
      try {
        const outcome = await store.claimAndCommit(key, print, async ({ downstreamKey }) => ({
          response: paymentOf(paymentEvent(account, key, CARD), downstreamKey, `ch_${downstreamKey}`).response,
          effects: [],
        }));
        if (outcome.kind !== 'committed') noteError(new Error(`first request answered ${outcome.kind}`));
      } catch (error) {
        noteError(error);
      }
      const ms = now() - callStarted;
      firstMs.push(ms);
      allFirst.push({ at: callStarted, ms });
      inserted += 1;
    };
    const inserting = (async () => {
      const interval = 1000 / options.insertRate;
      const inFlight = new Set<Promise<void>>();
      for (let i = 0; now() < endAt; i++) {
        const due = started + i * interval;
        const wait = due - now();
        if (wait > 1) await sleep(wait);
        const call = insert(i).finally(() => inFlight.delete(call));
        inFlight.add(call);
        if (inFlight.size >= 16) await Promise.race(inFlight);
      }
      await Promise.all(inFlight);
    })();
    // The purge: every second, as many batches as there is expired work.
    const purging = (async () => {
      while (now() < endAt) {
        const purgeStarted = now();
        try {
          const deleted = await store.purgeExpired({ batchSize: 1000, maxBatches: 100 });
          if (deleted > 0) firstPurgeAt ??= purgeStarted;
          purged += deleted;
        } catch (error) {
          noteError(error);
        }
        purgeMs += now() - purgeStarted;
        await sleep(Math.max(0, 1000 - (now() - purgeStarted)));
      }
    })();
    const windows: ExpiryWindow[] = [];
    const sampling = (async () => {
      let last = { inserted: 0, purged: 0, purgeMs: 0 };
      while (now() < endAt) {
        await sleep(Math.min(WINDOW_SECONDS * 1000, Math.max(0, endAt - now())));
        const { rows } = await pool.query<{
          live: string;
          dead: string;
          table_bytes: string;
          index_bytes: string;
          autovacuums: string;
        }>(
          `SELECT n_live_tup AS live, n_dead_tup AS dead, pg_table_size(relid) AS table_bytes,
                  pg_indexes_size(relid) AS index_bytes, autovacuum_count AS autovacuums
             FROM pg_stat_user_tables WHERE relid = '${table}'::regclass`,
        );
        const row = rows[0];
        windows.push({
          atSeconds: (now() - started) / 1000,
          liveRows: Number(row?.live),
          deadRows: Number(row?.dead),
          tableBytes: Number(row?.table_bytes),
          indexBytes: Number(row?.index_bytes),
          inserted: inserted - last.inserted,
          purged: purged - last.purged,
          purgeMs: purgeMs - last.purgeMs,
          firstMs: summarize(firstMs),
          autovacuums: Number(row?.autovacuums),
        });
        last = { inserted, purged, purgeMs };
        firstMs = [];
      }
    })();
    await Promise.all([inserting, purging, sampling]);

    const durationSeconds = (now() - started) / 1000;
    const before = allFirst.filter((call) => call.at < started + options.ttlSeconds * 1000).map((call) => call.ms);
    const steadyFrom = (firstPurgeAt ?? endAt) + WINDOW_SECONDS * 1000;
    const steady = allFirst.filter((call) => call.at >= steadyFrom).map((call) => call.ms);
    // Steady: a TTL for the first records to expire, another for the table to hold a TTL's live rows and a TTL's
    // purged ones, and an autovacuum nap for their space to be handed back; from then on it should stop growing.
    const steadyAfter = 2 * options.ttlSeconds + options.autovacuumNaptimeSeconds;
    const steadyWindows = windows.filter((w) => w.atSeconds - WINDOW_SECONDS >= steadyAfter);
    const sizes = steadyWindows.map((w) => w.tableBytes + w.indexBytes);
    await pool.query(`DROP SCHEMA "${SCHEMA}" CASCADE`);
    return {
      durationSeconds,
      ttlSeconds: options.ttlSeconds,
      insertRate: { target: options.insertRate, achieved: inserted / durationSeconds },
      autovacuum: EXPIRY_AUTOVACUUM,
      windows,
      purgeRowsPerSecond: purgeMs > 0 ? purged / (purgeMs / 1000) : 0,
      before: summarize(before),
      steady: summarize(steady),
      steadyGrowth: sizes.length > 1 ? Math.max(...sizes) / (sizes[0] as number) : Number.NaN,
      errors,
    };
  } finally {
    await pool.end();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * `npx tsx --conditions=keystone-source bench/expiry.ts`: this part alone, against a PostgreSQL of its own, printed
 * as JSON (BENCH_EXPIRY_SECONDS, BENCH_EXPIRY_TTL, BENCH_EXPIRY_RATE).
 */
if (require.main === module) {
  void (async () => {
    const { startBenchPostgres, BENCH_AUTOVACUUM_NAPTIME_SECONDS } = await import('./stores');
    const postgres = await startBenchPostgres();
    try {
      const result = await measureExpiry({
        postgresUrl: postgres.url,
        durationSeconds: Number(process.env.BENCH_EXPIRY_SECONDS ?? 150),
        ttlSeconds: Number(process.env.BENCH_EXPIRY_TTL ?? 30),
        insertRate: Number(process.env.BENCH_EXPIRY_RATE ?? 200),
        autovacuumNaptimeSeconds: BENCH_AUTOVACUUM_NAPTIME_SECONDS,
      });
      console.log(JSON.stringify(result, null, 2));
    } finally {
      await postgres.stop();
    }
  })();
}
