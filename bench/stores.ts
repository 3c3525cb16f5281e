import { randomUUID } from 'node:crypto';
import { ConnectionTracker, RoundTrips } from '@keystone-idempotency/local-aws/pg-meter';
import { type PostgresLocal, startPostgresLocal } from '@keystone-idempotency/local-aws/postgres-local';
import { fingerprint, scopedKey } from 'keystone-idempotency/engine';
import { PostgresStore } from 'keystone-idempotency/postgres';
import { Pool } from 'pg';
import { migrateService, PostgresPayments } from '../lib/payments/postgres';
import { ConflictError, Db, documentTableSql, RetryLaterError, withIdempotency } from './held-transaction';
import { pool as inParallel, interleave, type LatencySummary, median, now, summarize } from './measure';
import {
  CARD,
  ExternalEffect,
  freshDownstreamKey,
  OPERATION,
  type PaymentEvent,
  paymentEvent,
  paymentOf,
} from './payment-flow';
import { countPayments, DEFAULT_STORM } from './storm';
import { type CallOutcome, createVariants, holdThroughEffect, type Variant } from './variants';

/**
 * The stores side by side (issue 15 §5): the PostgreSQL store, the design documents' `withIdempotency` as written (one
 * transaction held across the work; bench/held-transaction.ts) and the DynamoDB store, each with a local effect (the
 * payment row alone) and with an outside effect (a charge, then the row). Per call: round trips, p50/p99, and the
 * connections a call holds across its outside call; then the 100-key storm, once with the local effect and once with
 * a 200 ms outside call, counting effects (exactly one row, and one charge, per key), round trips, and the pool's
 * connections held at peak.
 */

export const STORE_VARIANT_NAMES = [
  'pg-local',
  'pg-external',
  'document-local',
  'document-external',
  'dynamodb-local',
  'dynamodb-external',
] as const;
export type StoreVariantName = (typeof STORE_VARIANT_NAMES)[number];

export const STORE_VARIANT_LABELS: Record<StoreVariantName, string> = {
  'pg-local': 'PostgreSQL store: claimAndCommit',
  'pg-external': 'PostgreSQL store: claim + effect + commit',
  'document-local': "documents' withIdempotency (held transaction), local work",
  'document-external': "documents' withIdempotency (held transaction), outside call inside",
  'dynamodb-local': 'DynamoDB store: claimAndCommit',
  'dynamodb-external': 'DynamoDB store: claim + effect + commit',
};

export const STORE_PATHS = ['first', 'replay', 'in_flight'] as const;
export type StorePath = (typeof STORE_PATHS)[number];

/** The outside call of the storm with an outside effect. */
export const OUTSIDE_CALL_MS = 200;

/** The database the PostgreSQL variants share: the service's schema (keys and payments) and the document's table. */
const SCHEMA = 'bench';
const DOCUMENT_SCHEMA = 'bench_document';

interface StoreVariant {
  readonly name: StoreVariantName;
  readonly store: 'postgres' | 'dynamodb';
  /** Local: the payment row only. External: a charge at the outside processor, then the row. */
  readonly form: 'local' | 'external';
  readonly effect: ExternalEffect;
  /** Round trips (DynamoDB: requests) since the last reset. */
  roundTrips(): number;
  resetRoundTrips(): void;
  /** The pool's connections (PostgreSQL only). */
  readonly connections?: ConnectionTracker;
  /** Most connections one call held when its outside call started, since the last reset (PostgreSQL only). */
  heldAcrossCall(): number | undefined;
  resetHeldAcrossCall(): void;
  call(event: PaymentEvent): Promise<CallOutcome>;
  /** Puts the key in flight; absent for the held transaction, whose duplicate waits for the original instead. */
  holdInFlight?(event: PaymentEvent): Promise<() => Promise<void>>;
  rows(accountId: string): Promise<number>;
  /** Opens `count` connections up front, so that no measured call pays (or counts) a handshake. */
  warm(count: number): Promise<void>;
  close(): Promise<void>;
  readonly errors: string[];
}

/** One variant on one path. */
export interface StoreRow {
  readonly variant: StoreVariantName;
  readonly path: StorePath;
  readonly latencyMs: LatencySummary;
  readonly roundTrips: { readonly min: number; readonly max: number; readonly mean: number };
  readonly unexpected: Readonly<Partial<Record<CallOutcome, number>>>;
  readonly effectRuns: number;
  /** Connections the call held when its outside call started (first request, outside effect, PostgreSQL): the most seen. */
  readonly heldAcrossCall?: number;
}

/** One variant's storms of one kind. */
export interface StoreStorm {
  readonly variant: StoreVariantName;
  readonly kind: 'local' | 'outside';
  readonly outsideCallMs: number;
  readonly wallMs: readonly number[];
  readonly medianWallMs: number;
  readonly rows: readonly number[];
  readonly effectCalls: readonly number[];
  readonly outcomes: Readonly<Partial<Record<CallOutcome, number>>>;
  readonly roundTripsPerCall: number;
  /** The pool's connections checked out at once, at most, per round (PostgreSQL only). */
  readonly peakHeld?: readonly number[];
  /** The pool's connections checked out on average over the storm (time-weighted), per round (PostgreSQL only). */
  readonly meanHeld?: readonly number[];
  /**
   * Connection-milliseconds per call, over all rounds: how long the storm kept connections checked out, divided by
   * its calls (PostgreSQL only). Unlike the peak, which 50 callers arriving at once reach in any form, it tells a
   * connection held across a 200 ms call from one held for a round trip.
   */
  readonly connectionMsPerCall?: number;
  /** Callers waiting for a connection at once, at most, per round (PostgreSQL only). */
  readonly peakWaiting?: readonly number[];
  /** Most connections one call held across its outside call (PostgreSQL, outside effect). */
  readonly heldAcrossCall?: number;
  /** Latency of the calls that did the work, and of the duplicates, over all rounds. */
  readonly firstMs: LatencySummary;
  readonly duplicateMs: LatencySummary;
  /** One row per key in every round, and one charge per key with an outside effect. */
  readonly correct: boolean;
  readonly errors: readonly string[];
}

export interface StoresResult {
  readonly postgres: string;
  readonly poolMax: number;
  readonly calls: number;
  readonly rows: readonly StoreRow[];
  readonly storms: readonly StoreStorm[];
  /** The PostgreSQL variants again, through a proxy that delays each way (absent when skipped: BENCH_SKIP=rtt). */
  readonly network?: readonly NetworkRun[];
}

/** The one-way delays the network runs add (RDS Proxy in the same zone; another availability zone). */
export const NETWORK_ONE_WAY_MS = [0.5, 2] as const;
/** The variants and paths measured over the network: ours against the held transaction, first request and replay. */
export const NETWORK_VARIANTS = ['pg-local', 'pg-external', 'document-local', 'document-external'] as const;
export const NETWORK_PATHS = ['first', 'replay'] as const;

/** The PostgreSQL variants through a latency proxy (packages/local-aws/src/latency-proxy.ts). */
export interface NetworkRun {
  /** The delay asked for, each way. */
  readonly oneWayMs: number;
  /** A bare `SELECT 1`, p50, through the proxy and straight to the server: what the proxy really adds. */
  readonly roundTripMs: { readonly proxied: number; readonly direct: number };
  readonly calls: number;
  readonly rows: readonly StoreRow[];
}

/**
 * PostgreSQL for the benchmark: the throwaway server the tests use (packages/local-aws/src/postgres-local.ts: no fsync, as DynamoDB
 * Local keeps its tables in memory), with room for every variant's pool of 50 at once.
 */
export const BENCH_AUTOVACUUM_NAPTIME_SECONDS = 15;

export function startBenchPostgres(): Promise<PostgresLocal> {
  return startPostgresLocal({
    settings: {
      max_connections: '300',
      // Room for the million-record table of bench/scale.ts (about 780 MiB with its indexes) in the buffer cache, as
      // a server sized for its working set would have it (the default, 128 MB, sends most random reads to the OS).
      shared_buffers: '1GB',
      // Autovacuum looks for work every 15 s instead of every minute: bench/expiry.ts turns its table over every
      // 30 s, and vacuum is what hands the purged rows' space back.
      autovacuum_naptime: `${BENCH_AUTOVACUUM_NAPTIME_SECONDS}s`,
    },
  });
}

export interface StoresOptions {
  readonly postgresUrl: string;
  readonly dynamoDbEndpoint: string;
  readonly calls: number;
  readonly warmup: number;
  readonly stormRounds: number;
  /** Calls per variant and path through each latency proxy; 0 leaves the network runs out. */
  readonly networkCalls?: number;
}

export async function measureStores(options: StoresOptions): Promise<StoresResult> {
  const poolMax = DEFAULT_STORM.concurrency;
  const admin = new Pool({ connectionString: options.postgresUrl, max: 2 });
  try {
    await migrateService(admin, { schema: SCHEMA });
    await admin.query(documentTableSql(DOCUMENT_SCHEMA));
    const { rows } = await admin.query<{ server_version: string }>('SHOW server_version');
    const variants = await createStoreVariants(options, poolMax);
    try {
      const results: StoreRow[] = [];
      for (const path of STORE_PATHS) {
        results.push(...(await measureStorePath(path, variants, options)));
      }
      const storms: StoreStorm[] = [];
      for (const kind of options.stormRounds > 0 ? (['local', 'outside'] as const) : []) {
        const taking = variants.filter((variant) => variant.form === (kind === 'local' ? 'local' : 'external'));
        for (const variant of taking) await variant.warm(poolMax);
        const runs = new Map<StoreVariant, StormRound[]>(taking.map((variant) => [variant, []]));
        await interleave(taking, options.stormRounds, async (variant, round) => {
          runs.get(variant)?.push(await stormRound(variant, kind, round));
        });
        for (const [variant, rounds] of runs) storms.push(summarizeStorm(variant, kind, rounds));
      }
      const network = (options.networkCalls ?? 0) > 0 ? await measureOverNetwork(options, poolMax) : undefined;
      return {
        postgres: rows[0]?.server_version ?? 'unknown',
        poolMax,
        calls: options.calls,
        rows: results,
        storms,
        ...(network ? { network } : {}),
      };
    } finally {
      for (const variant of variants) await variant.close();
    }
  } finally {
    await admin.end();
  }
}

/**
 * Issue 25 §1: the claim that fewer round trips pay off over a network, measured. For each one-way delay, the
 * PostgreSQL variants get pools of their own on a latency proxy, and the first request and the replay are measured
 * interleaved, as on loopback. The bare round trip through the proxy is measured too: Node's timers round a delay
 * under a millisecond up, so what it adds is reported as measured, not as asked.
 */
async function measureOverNetwork(options: StoresOptions, poolMax: number): Promise<NetworkRun[]> {
  const { startLatencyProxy } = await import('@keystone-idempotency/local-aws/latency-proxy');
  const calls = options.networkCalls ?? 0;
  const runs: NetworkRun[] = [];
  for (const oneWayMs of NETWORK_ONE_WAY_MS) {
    const proxy = await startLatencyProxy(options.postgresUrl, { oneWayMs });
    const variants = NETWORK_VARIANTS.map((name) => postgresVariant(name, proxy.url, poolMax));
    try {
      for (const variant of variants) await variant.warm(2);
      const roundTripMs = {
        proxied: await bareRoundTrip(proxy.url),
        direct: await bareRoundTrip(options.postgresUrl),
      };
      const rows: StoreRow[] = [];
      for (const path of NETWORK_PATHS) {
        rows.push(...(await measureStorePath(path, variants, { calls, warmup: Math.min(options.warmup, 20) })));
      }
      runs.push({ oneWayMs, roundTripMs, calls, rows });
    } finally {
      for (const variant of variants) await variant.close();
      await proxy.close();
    }
  }
  return runs;
}

/** p50 of 200 `SELECT 1`s on one connection. */
async function bareRoundTrip(url: string): Promise<number> {
  const pg = new Pool({ connectionString: url, max: 1 });
  try {
    for (let i = 0; i < 20; i++) await pg.query('SELECT 1');
    const samples: number[] = [];
    for (let i = 0; i < 200; i++) {
      const started = now();
      await pg.query('SELECT 1');
      samples.push(now() - started);
    }
    return median(samples);
  } finally {
    await pg.end();
  }
}

async function createStoreVariants(options: StoresOptions, poolMax: number): Promise<StoreVariant[]> {
  const dynamoDb = await createVariants({ endpoint: options.dynamoDbEndpoint }, ['ours-local', 'ours-external']);
  const byName = new Map(dynamoDb.map((variant) => [variant.name, variant]));
  return STORE_VARIANT_NAMES.map((name) => {
    switch (name) {
      case 'dynamodb-local':
        return dynamoDbVariant(name, byName.get('ours-local') as Variant);
      case 'dynamodb-external':
        return dynamoDbVariant(name, byName.get('ours-external') as Variant);
      default:
        return postgresVariant(name, options.postgresUrl, poolMax);
    }
  });
}

/** The DynamoDB store as the main bench drives it (bench/variants.ts, on a table without the recovery index). */
function dynamoDbVariant(name: 'dynamodb-local' | 'dynamodb-external', variant: Variant): StoreVariant {
  variant.meter.pause();
  return {
    name,
    store: 'dynamodb',
    form: name === 'dynamodb-local' ? 'local' : 'external',
    effect: variant.effect,
    roundTrips: () => variant.meter.requests.length,
    resetRoundTrips: () => {
      variant.meter.reset();
      variant.meter.resume();
    },
    heldAcrossCall: () => undefined,
    resetHeldAcrossCall: () => undefined,
    call: (event) => variant.call(event),
    holdInFlight: (event) => variant.holdInFlight(event),
    rows: (accountId) => countPayments(variant, accountId),
    warm: async () => undefined,
    close: async () => variant.close(),
    errors: variant.errors as string[],
  };
}

function postgresVariant(
  name: Exclude<StoreVariantName, 'dynamodb-local' | 'dynamodb-external'>,
  url: string,
  poolMax: number,
): StoreVariant {
  const roundTrips = new RoundTrips();
  // As the service's pool (lib/runtime/postgres.ts): pipelined. Idle connections are kept, so that no measured call
  // pays for a handshake; the storms' 50 calls in flight each find a connection (as 50 Lambda containers would).
  const pg = new Pool({
    connectionString: url,
    pipeline: true,
    max: poolMax,
    idleTimeoutMillis: 0,
    stream: roundTrips.socket(),
  });
  pg.on('error', () => undefined);
  const connections = new ConnectionTracker(pg);
  const payments = new PostgresPayments(pg, { schema: SCHEMA });
  const effect = new ExternalEffect();
  const errors: string[] = [];
  const noteError = (error: unknown) => {
    if (errors.length < 5) errors.push(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
  };
  let heldAcrossCall = 0;
  /** The outside call, noting what this call holds as it starts. */
  const charge = async (event: PaymentEvent) => {
    heldAcrossCall = Math.max(heldAcrossCall, connections.heldByThisCall());
    return effect.charge(keyOf(event));
  };
  const form = name.endsWith('-local') ? 'local' : 'external';
  const base = {
    name,
    store: 'postgres' as const,
    form: form as 'local' | 'external',
    effect,
    connections,
    errors,
    roundTrips: () => roundTrips.count,
    resetRoundTrips: () => roundTrips.reset(),
    heldAcrossCall: () => (form === 'external' ? heldAcrossCall : undefined),
    resetHeldAcrossCall: () => {
      heldAcrossCall = 0;
    },
    async rows(accountId: string) {
      const { rows } = await pg.query<{ count: string }>(
        `SELECT count(*) FROM "${SCHEMA}".payments WHERE account_id = $1`,
        [accountId],
      );
      return Number(rows[0]?.count);
    },
    async warm(count: number) {
      const clients = await Promise.all(Array.from({ length: count }, () => pg.connect()));
      for (const client of clients) client.release();
    },
    close: () => pg.end(),
  };

  if (name === 'document-local' || name === 'document-external') {
    const db = new Db(pg, DOCUMENT_SCHEMA);
    return {
      ...base,
      async call(event) {
        let ran = false;
        try {
          await connections.within(() =>
            withIdempotency(
              db,
              { accountId: Number(accountOf(event)), key: keyOf(event), requestHash: printOf(event) },
              async (tx) => {
                ran = true;
                const downstreamKey = freshDownstreamKey();
                const chargeId = form === 'external' ? await charge(event) : `local_${downstreamKey}`;
                const { payment, response } = paymentOf(event, downstreamKey, chargeId);
                const row = payments.putPayment(accountOf(event), payment, downstreamKey);
                await tx.query(row.text, [...(row.values ?? [])]);
                return response;
              },
            ),
          );
          return ran ? 'created' : 'replay';
        } catch (error) {
          if (error instanceof ConflictError) return 'mismatch';
          if (error instanceof RetryLaterError) return 'in_flight';
          noteError(error);
          return 'error';
        }
      },
    };
  }

  const store = new PostgresStore({ pool: pg, schema: SCHEMA, leaseSeconds: 900, ttlSeconds: 24 * 60 * 60 });
  const identify = (event: PaymentEvent) => ({
    key: scopedKey({ accountId: accountOf(event), operation: OPERATION, key: keyOf(event) }),
    print: printOf(event),
  });
  if (name === 'pg-external') {
    const call = (event: PaymentEvent): Promise<CallOutcome> =>
      connections.within(async () => {
        const { key, print } = identify(event);
        const outcome = await store.claim(key, print).catch((error: unknown) => {
          noteError(error);
          return { kind: 'error' } as const;
        });
        if (outcome.kind !== 'acquired') return outcome.kind;
        const { lease } = outcome;
        try {
          const chargeId = await charge(event);
          const { payment, response } = paymentOf(event, lease.downstreamKey, chargeId);
          await store.commit(lease, response, [payments.putPayment(accountOf(event), payment, lease.downstreamKey)]);
          return 'created';
        } catch (error) {
          noteError(error);
          await store.release(lease).catch(() => false);
          return 'error';
        }
      });
    return { ...base, call, holdInFlight: (event) => holdThroughEffect(effect, event, call) };
  }
  return {
    ...base,
    call: (event) =>
      connections.within(async () => {
        const { key, print } = identify(event);
        try {
          const outcome = await store.claimAndCommit(key, print, async ({ downstreamKey }) => {
            const { payment, response } = paymentOf(event, downstreamKey, `local_${downstreamKey}`);
            return { response, effects: [payments.putPayment(accountOf(event), payment, downstreamKey)] };
          });
          return outcome.kind === 'committed' ? 'created' : outcome.kind;
        } catch (error) {
          noteError(error);
          return 'error';
        }
      }),
    // Held by someone else's claim, as on DynamoDB (bench/variants.ts).
    async holdInFlight(event) {
      const { key, print } = identify(event);
      const outcome = await store.claim(key, print);
      if (outcome.kind !== 'acquired') throw new Error(`could not hold ${key}: ${outcome.kind}`);
      return async () => {
        await store.release(outcome.lease);
      };
    },
  };
}

const keyOf = (event: PaymentEvent) => event.headers['Idempotency-Key'] as string;
const accountOf = (event: PaymentEvent) => event.requestContext.authorizer.accountId;
const printOf = (event: PaymentEvent) =>
  fingerprint({ operation: OPERATION, body: event.body, contentType: event.headers['Content-Type'] });

/** Accounts are numbers here: the document's table keys them as `bigint`. */
let accounts = Math.floor(Date.now() / 1000) * 1000;
const nextAccount = () => String(++accounts);

const EXPECTED: Record<StorePath, CallOutcome> = { first: 'created', replay: 'replay', in_flight: 'in_flight' };

/** One path for every variant that has it, interleaved call by call after `warmup` unmeasured rounds. */
async function measureStorePath(
  path: StorePath,
  all: readonly StoreVariant[],
  options: Pick<StoresOptions, 'calls' | 'warmup'>,
): Promise<StoreRow[]> {
  const variants = path === 'in_flight' ? all.filter((variant) => variant.holdInFlight) : all;
  const tallies = new Map<
    StoreVariant,
    {
      next: () => PaymentEvent;
      teardown: () => Promise<void>;
      latencies: number[];
      trips: number[];
      unexpected: Partial<Record<CallOutcome, number>>;
      effectRuns: number;
    }
  >();
  for (const variant of variants) {
    const accountId = nextAccount();
    const key = `${path}-${randomUUID()}`;
    let next = () => paymentEvent(accountId, `first-${randomUUID()}`, CARD);
    let teardown = async (): Promise<void> => undefined;
    if (path === 'replay') {
      const original = await variant.call(paymentEvent(accountId, key, CARD));
      if (original !== 'created') throw new Error(`${variant.name}: could not complete ${key} (${original})`);
      next = () => paymentEvent(accountId, key, CARD);
    } else if (path === 'in_flight') {
      const finish = await variant.holdInFlight?.(paymentEvent(accountId, key, CARD));
      next = () => paymentEvent(accountId, key, CARD);
      teardown = async () => {
        await finish?.();
      };
    }
    tallies.set(variant, { next, teardown, latencies: [], trips: [], unexpected: {}, effectRuns: 0 });
  }
  const tallyOf = (variant: StoreVariant) => tallies.get(variant) as NonNullable<ReturnType<typeof tallies.get>>;
  try {
    await interleave(variants, options.warmup, async (variant) => {
      await variant.call(tallyOf(variant).next());
    });
    for (const variant of variants) variant.resetHeldAcrossCall();
    await interleave(variants, options.calls, async (variant) => {
      const tally = tallyOf(variant);
      const event = tally.next();
      const effectsBefore = variant.effect.calls;
      variant.resetRoundTrips();
      const started = now();
      const outcome = await variant.call(event);
      tally.latencies.push(now() - started);
      tally.trips.push(variant.roundTrips());
      if (outcome !== EXPECTED[path]) tally.unexpected[outcome] = (tally.unexpected[outcome] ?? 0) + 1;
      if (path !== 'first') tally.effectRuns += variant.effect.calls - effectsBefore;
    });
  } finally {
    for (const tally of tallies.values()) await tally.teardown();
  }
  return variants.map((variant) => {
    const tally = tallyOf(variant);
    const held = path === 'first' ? variant.heldAcrossCall() : undefined;
    return {
      variant: variant.name,
      path,
      latencyMs: summarize(tally.latencies),
      roundTrips: {
        min: Math.min(...tally.trips),
        max: Math.max(...tally.trips),
        mean: tally.trips.reduce((sum, trips) => sum + trips, 0) / Math.max(tally.trips.length, 1),
      },
      unexpected: tally.unexpected,
      effectRuns: tally.effectRuns,
      ...(held === undefined ? {} : { heldAcrossCall: held }),
    };
  });
}

interface StormRound {
  readonly wallMs: number;
  readonly rows: number;
  readonly effectCalls: number;
  readonly outcomes: Partial<Record<CallOutcome, number>>;
  readonly roundTrips: number;
  readonly peakHeld?: number;
  readonly meanHeld?: number;
  readonly peakWaiting?: number;
  readonly heldAcrossCall?: number;
  readonly firstMs: number[];
  readonly duplicateMs: number[];
}

/**
 * The duplicate storm of bench/storm.ts (1000 calls over 100 keys, 50 in flight, each key's ten calls consecutive),
 * with the local effect, or with an outside call of {@link OUTSIDE_CALL_MS}.
 */
async function stormRound(variant: StoreVariant, kind: 'local' | 'outside', round: number): Promise<StormRound> {
  const { calls, keys, concurrency } = DEFAULT_STORM;
  const accountId = nextAccount();
  const perKey = Math.ceil(calls / keys);
  const events = Array.from({ length: calls }, (_, index) =>
    paymentEvent(accountId, `storm-${round}-${Math.floor(index / perKey)}`, CARD),
  );
  const outcomes: Partial<Record<CallOutcome, number>> = {};
  const firstMs: number[] = [];
  const duplicateMs: number[] = [];
  const effectsBefore = variant.effect.calls;
  variant.effect.latencyMs = kind === 'outside' ? OUTSIDE_CALL_MS : 0;
  variant.resetHeldAcrossCall();
  variant.resetRoundTrips();
  variant.connections?.start();
  const started = now();
  try {
    await inParallel(events.length, concurrency, async (index) => {
      const callStarted = now();
      const outcome = await variant.call(events[index] as PaymentEvent);
      (outcome === 'created' ? firstMs : duplicateMs).push(now() - callStarted);
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    });
  } finally {
    variant.effect.latencyMs = 0;
  }
  const wallMs = now() - started;
  const use = variant.connections?.stop();
  const roundTrips = variant.roundTrips();
  const held = variant.heldAcrossCall();
  return {
    wallMs,
    rows: await variant.rows(accountId),
    effectCalls: variant.effect.calls - effectsBefore,
    outcomes,
    roundTrips,
    ...(use ? { peakHeld: use.peakHeld, meanHeld: use.meanHeld, peakWaiting: use.peakWaiting } : {}),
    ...(held === undefined ? {} : { heldAcrossCall: held }),
    firstMs,
    duplicateMs,
  };
}

function summarizeStorm(variant: StoreVariant, kind: 'local' | 'outside', rounds: readonly StormRound[]): StoreStorm {
  const outcomes: Partial<Record<CallOutcome, number>> = {};
  for (const round of rounds) {
    for (const [outcome, count] of Object.entries(round.outcomes) as [CallOutcome, number][]) {
      outcomes[outcome] = (outcomes[outcome] ?? 0) + count;
    }
  }
  const wallMs = rounds.map((round) => round.wallMs);
  const { keys, calls } = DEFAULT_STORM;
  const external = variant.form === 'external';
  const held = rounds.map((round) => round.heldAcrossCall).filter((value) => value !== undefined);
  return {
    variant: variant.name,
    kind,
    outsideCallMs: kind === 'outside' ? OUTSIDE_CALL_MS : 0,
    wallMs,
    medianWallMs: median(wallMs),
    rows: rounds.map((round) => round.rows),
    effectCalls: rounds.map((round) => round.effectCalls),
    outcomes,
    roundTripsPerCall: rounds.reduce((sum, round) => sum + round.roundTrips, 0) / (calls * Math.max(rounds.length, 1)),
    ...(variant.connections
      ? {
          peakHeld: rounds.map((round) => round.peakHeld ?? 0),
          meanHeld: rounds.map((round) => round.meanHeld ?? 0),
          connectionMsPerCall:
            rounds.reduce((sum, round) => sum + (round.meanHeld ?? 0) * round.wallMs, 0) /
            (calls * Math.max(rounds.length, 1)),
          peakWaiting: rounds.map((round) => round.peakWaiting ?? 0),
        }
      : {}),
    ...(held.length ? { heldAcrossCall: Math.max(...held) } : {}),
    firstMs: summarize(rounds.flatMap((round) => round.firstMs)),
    duplicateMs: summarize(rounds.flatMap((round) => round.duplicateMs)),
    correct: rounds.every((round) => round.rows === keys && (!external || round.effectCalls === keys)),
    errors: variant.errors,
  };
}

/**
 * `npx tsx bench/stores.ts`: this part alone, against a DynamoDB Local and a PostgreSQL of its own, printed as JSON
 * (BENCH_CALLS, BENCH_WARMUP, BENCH_STORM_ROUNDS).
 */
if (require.main === module) {
  void (async () => {
    const { startDynamoDbLocal } = await import('@keystone-idempotency/local-aws/dynamodb-local');
    const [db, postgres] = await Promise.all([startDynamoDbLocal(), startBenchPostgres()]);
    try {
      const result = await measureStores({
        postgresUrl: postgres.url,
        dynamoDbEndpoint: db.endpoint,
        calls: Number(process.env.BENCH_CALLS ?? 500),
        warmup: Number(process.env.BENCH_WARMUP ?? 50),
        stormRounds: Number(process.env.BENCH_STORM_ROUNDS ?? 3),
        networkCalls: Number(process.env.BENCH_NETWORK_CALLS ?? 200),
      });
      console.log(JSON.stringify(result, null, 2));
    } finally {
      await Promise.all([db.stop(), postgres.stop()]);
    }
  })();
}
