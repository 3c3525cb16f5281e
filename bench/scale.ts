import { createHash, randomUUID } from 'node:crypto';
import { BatchWriteCommand, paginateScan } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { fingerprint, scopedKey } from 'keystone-idempotency/engine';
import { migrate, PostgresStore } from 'keystone-idempotency/postgres';
import { Pool } from 'pg';
import { itemBytes } from './capacity';
import { type LatencySummary, now, summarize } from './measure';
import { CARD, OPERATION, paymentEvent, paymentOf } from './payment-flow';
import { createVariants, type Variant } from './variants';

/**
 * Issue 25 §2: cost as the table grows. Live (completed, unexpired) records are loaded in steps, 10 thousand, 100
 * thousand, then 1 million, and at each size the first request and the replay of a key picked at random among those
 * loaded are measured, interleaved: on PostgreSQL (the store's own statements, `INSERT ... SELECT generate_series`
 * copies of one record the store wrote, then VACUUM ANALYZE as a table in service would be), and on DynamoDB Local as
 * far as it loads within its time budget (BatchWriteItem, 25 items a request, copies of one record the store wrote).
 * With each size, bytes per record and per index entry: PostgreSQL's relation sizes, DynamoDB's item size by its
 * documented counting rule.
 */

export const SCALE_SIZES = [10_000, 100_000, 1_000_000] as const;
/** The target: p50 at the largest size at most this many times the p50 at the smallest. */
export const MAX_SCALE_GROWTH = 1.2;

export interface ScaleStep {
  readonly records: number;
  /** Time to load the records added since the last step (ms). */
  readonly loadMs: number;
  readonly first: LatencySummary;
  readonly replay: LatencySummary;
  /** Calls whose outcome was not the path's (a first request not committed, a replay not replayed). */
  readonly unexpected: number;
  /** PostgreSQL: WAL written per first request (replays write none), a measure of what a write costs the server. */
  readonly walBytesPerFirst?: number;
}

export interface PostgresScale {
  readonly steps: readonly ScaleStep[];
  /** At the largest size loaded: the heap (with TOAST), the primary key, and the expiry index, in bytes. */
  readonly bytes: { readonly table: number; readonly primaryKey: number; readonly expiryIndex: number };
  readonly records: number;
}

export interface DynamoDbScale {
  readonly steps: readonly ScaleStep[];
  /** The largest size that did not load within the budget, and how far it got; absent when every size loaded. */
  readonly stoppedAt?: { readonly size: number; readonly loaded: number; readonly budgetSeconds: number };
  /** A completed record as the store writes it, by DynamoDB's item size rule (names plus values). */
  readonly itemBytes: number;
  /** Items loaded per second (BatchWriteItem, several requests in flight). */
  readonly itemsPerSecond: number;
}

export interface ScaleResult {
  readonly calls: number;
  readonly postgres: PostgresScale;
  readonly dynamodb?: DynamoDbScale;
  /** What a million live keys cost: at rest, and per first request's write, on each store. */
  readonly perMillion: {
    readonly postgresBytes: number;
    readonly postgresUsdPerMonth: number;
    readonly dynamodbBytes: number;
    readonly dynamodbUsdPerMonth: number;
    /** Write units a first request's record costs on DynamoDB (a Put of an item of `itemBytes`, or a transaction's share). */
    readonly dynamodbWriteUnitsPerRecord: number;
  };
}

export interface ScaleOptions {
  readonly postgresUrl: string;
  readonly dynamoDbEndpoint?: string;
  readonly calls: number;
  /** DynamoDB Local's loading budget, in seconds, over all sizes. */
  readonly dynamoDbBudgetSeconds: number;
  readonly sizes?: readonly number[];
}

/** Storage prices, us-east-1, for the at-rest figures. */
export const STORAGE_PRICES = {
  /** RDS for PostgreSQL, gp3 storage, per GB-month (https://aws.amazon.com/rds/postgresql/pricing/). */
  postgresUsdPerGbMonth: 0.115,
  /** DynamoDB Standard table class, per GB-month beyond the free 25 GB (https://aws.amazon.com/dynamodb/pricing/on-demand/). */
  dynamodbUsdPerGbMonth: 0.25,
  /** DynamoDB counts 100 bytes of overhead per item for storage (same page). */
  dynamodbItemOverheadBytes: 100,
} as const;

const SCHEMA = 'bench_scale';
const ACCOUNTS = 1000;
const GB = 1024 ** 3;

/** The client key of loaded record `i`: a UUID, as clients send, derived so a replay can name any of them. */
function loadedKey(i: number): string {
  const hex = createHash('md5').update(`k${i}`).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
const accountOf = (i: number) => `acct_scale_${i % ACCOUNTS}`;

export async function measureScale(options: ScaleOptions): Promise<ScaleResult> {
  const sizes = options.sizes ?? SCALE_SIZES;
  const postgres = await postgresScale(options, sizes);
  const dynamodb = options.dynamoDbEndpoint ? await dynamoDbScale(options, options.dynamoDbEndpoint, sizes) : undefined;
  const pgPerRecord =
    (postgres.bytes.table + postgres.bytes.primaryKey + postgres.bytes.expiryIndex) / postgres.records;
  const ddbItem = dynamodb?.itemBytes ?? 0;
  const ddbStored = ddbItem + STORAGE_PRICES.dynamodbItemOverheadBytes;
  return {
    calls: options.calls,
    postgres,
    ...(dynamodb ? { dynamodb } : {}),
    perMillion: {
      postgresBytes: pgPerRecord * 1e6,
      postgresUsdPerMonth: ((pgPerRecord * 1e6) / GB) * STORAGE_PRICES.postgresUsdPerGbMonth,
      dynamodbBytes: ddbStored * 1e6,
      dynamodbUsdPerMonth: ((ddbStored * 1e6) / GB) * STORAGE_PRICES.dynamodbUsdPerGbMonth,
      dynamodbWriteUnitsPerRecord: Math.max(1, Math.ceil(ddbItem / 1024)),
    },
  };
}

async function postgresScale(options: ScaleOptions, sizes: readonly number[]): Promise<PostgresScale> {
  const pool = new Pool({ connectionString: options.postgresUrl, pipeline: true, max: 4, idleTimeoutMillis: 0 });
  pool.on('error', () => undefined);
  try {
    await pool.query(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
    await migrate(pool, { schema: SCHEMA });
    await pool.query('CREATE EXTENSION IF NOT EXISTS pg_prewarm');
    const store = new PostgresStore({ pool, schema: SCHEMA, leaseSeconds: 900, ttlSeconds: 24 * 60 * 60 });
    const table = `"${SCHEMA}".idempotency_keys`;
    // The prototype: a record the store wrote, with the payment's response, copied under every loaded key.
    const proto = scopedKey({ accountId: 'acct_scale_proto', operation: OPERATION, key: 'proto' });
    await store.claimAndCommit(proto, printOf(), async ({ downstreamKey }) => ({
      response: paymentOf(paymentEvent('acct_scale_proto', 'proto', CARD), downstreamKey, `ch_${downstreamKey}`)
        .response,
      effects: [],
    }));
    const scopeOf = (account: string) => scopedKey({ accountId: account, operation: OPERATION, key: 'x' }).slice(0, -2);
    const [scopePrefix, scopeSuffix] = scopeOf('acct_scale_0').split('acct_scale_0');
    const steps: ScaleStep[] = [];
    let loaded = 0;
    for (const size of sizes) {
      const started = now();
      // In slices of 100 thousand: one statement each, so none holds a huge transaction.
      for (let from = loaded + 1; from <= size; from += 100_000) {
        const to = Math.min(size, from + 99_999);
        await pool.query(
          `INSERT INTO ${table} (scope, key, status, fingerprint, lease_token, lease_expires_at, downstream_key, attempt,
             created_at, completed_at, expires_at, recover_at, response_status, response_headers, response_body,
             response_is_base64)
           SELECT $3 || 'acct_scale_' || (i % ${ACCOUNTS}) || $4,
                  substr(k, 1, 8) || '-' || substr(k, 9, 4) || '-' || substr(k, 13, 4) || '-' || substr(k, 17, 4) || '-' || substr(k, 21),
                  p.status, p.fingerprint, md5('t' || i), p.lease_expires_at - spread, 'idk_' || md5('d' || i),
                  p.attempt, p.created_at - spread, p.completed_at - spread, p.expires_at - spread, p.recover_at,
                  p.response_status, p.response_headers,
                  p.response_body, p.response_is_base64
             FROM generate_series($1::int, $2::int) AS i,
                  -- Written over the last 23 hours of a 24-hour TTL: every one still live, and the expiry index
                  -- holding distinct times, as in service (identical ones would deduplicate to a fraction).
                  LATERAL (SELECT md5('k' || i) AS k, make_interval(secs => i % 82800) AS spread) AS h,
                  ${table} AS p
            WHERE p.key = 'proto'`,
          [from, to, scopePrefix, scopeSuffix],
        );
      }
      // As a table in service would be: vacuumed and analysed, and the load's dirty pages written out, so that the
      // measured calls don't share the machine with the checkpoint a million rows' WAL would bring on.
      await pool.query(`VACUUM ANALYZE ${table}`);
      await pool.query('CHECKPOINT');
      // And its pages in the server's buffers, as a table in service holds its working set: a bulk load and a vacuum
      // go through small rings of buffers, so after them most of a million records' pages are in the OS's cache only,
      // and the measured calls would pay for reading them in, varying from run to run (1.0x to 1.4x at a million).
      await pool.query(
        `SELECT pg_prewarm('${table}'), pg_prewarm('"${SCHEMA}".idempotency_keys_pkey'),
                pg_prewarm('"${SCHEMA}".idempotency_keys_expiry')`,
      );
      const loadMs = now() - started;
      loaded = size;
      steps.push({ records: size, loadMs, ...(await measureStep(options.calls, size, store, pool)) });
    }
    const { rows } = await pool.query<{ table: string; pkey: string; expiry: string }>(
      `SELECT pg_table_size('${table}') AS table,
              pg_relation_size('"${SCHEMA}".idempotency_keys_pkey') AS pkey,
              pg_relation_size('"${SCHEMA}".idempotency_keys_expiry') AS expiry`,
    );
    const sizesRow = rows[0] as { table: string; pkey: string; expiry: string };
    const bytes = {
      table: Number(sizesRow.table),
      primaryKey: Number(sizesRow.pkey),
      expiryIndex: Number(sizesRow.expiry),
    };
    await pool.query(`DROP SCHEMA "${SCHEMA}" CASCADE`);
    return { steps, bytes, records: loaded + 1 };
  } finally {
    await pool.end();
  }
}

const printOf = () => {
  const event = paymentEvent('x', 'x', CARD);
  return fingerprint({ operation: OPERATION, body: event.body, contentType: event.headers['Content-Type'] });
};

/** First requests (fresh keys, claimAndCommit) and replays (a loaded key at random, claim), alternated. */
async function measureStep(
  calls: number,
  loaded: number,
  store: PostgresStore,
  pool: Pool,
): Promise<Pick<ScaleStep, 'first' | 'replay' | 'unexpected' | 'walBytesPerFirst'>> {
  const print = printOf();
  const first: number[] = [];
  const replay: number[] = [];
  let unexpected = 0;
  const walBefore = await walPosition(pool);
  for (let i = 0; i < calls + WARMUP; i++) {
    const fresh = scopedKey({ accountId: accountOf(i), operation: OPERATION, key: randomUUID() });
    let started = now();
    const committed = await store.claimAndCommit(fresh, print, async ({ downstreamKey }) => ({
      response: paymentOf(paymentEvent(accountOf(i), fresh, CARD), downstreamKey, `ch_${downstreamKey}`).response,
      effects: [],
    }));
    const firstMs = now() - started;
    const n = 1 + Math.floor(Math.random() * loaded);
    const known = scopedKey({ accountId: accountOf(n), operation: OPERATION, key: loadedKey(n) });
    started = now();
    const replayed = await store.claim(known, print);
    const replayMs = now() - started;
    if (i < WARMUP) continue;
    first.push(firstMs);
    replay.push(replayMs);
    if (committed.kind !== 'committed') unexpected += 1;
    if (replayed.kind !== 'replay') unexpected += 1;
  }
  const walBytes = Number(
    (
      await pool.query<{ bytes: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn) AS bytes', [
        walBefore,
      ])
    ).rows[0]?.bytes,
  );
  return {
    first: summarize(first),
    replay: summarize(replay),
    unexpected,
    walBytesPerFirst: walBytes / (calls + WARMUP),
  };
}

/** Unmeasured calls before each size's measured ones (the first size pays the client's warm-up). */
const WARMUP = 100;

async function walPosition(pool: Pool): Promise<string> {
  const { rows } = await pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn() AS lsn');
  return rows[0]?.lsn as string;
}

/**
 * DynamoDB Local: copies of one record the store wrote (the `ours-external` variant's table, without the recovery
 * index), 25 to a BatchWriteItem, 8 requests in flight, until each size is reached or the budget runs out.
 */
async function dynamoDbScale(
  options: ScaleOptions,
  endpoint: string,
  sizes: readonly number[],
): Promise<DynamoDbScale> {
  const [variant] = (await createVariants({ endpoint }, ['ours-external'])) as [Variant];
  try {
    const account = 'acct_scale_ddb';
    if ((await variant.call(paymentEvent(account, 'proto', CARD))) !== 'created') {
      throw new Error('DynamoDB scale: could not write the prototype record');
    }
    const table = variant.idempotencyTable as string;
    // Every page: the table also holds the per-call sections' and the storms' records, far more than a Scan's 1 MB.
    let proto: Record<string, unknown> | undefined;
    for await (const page of paginateScan(
      { client: variant.documentClient },
      {
        TableName: table,
        FilterExpression: '#status = :status',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':status': 'COMPLETED' },
      },
    )) {
      proto = page.Items?.find((item) => String(item.pk).endsWith('|proto'));
      if (proto) break;
    }
    if (!proto) throw new Error('DynamoDB scale: the prototype record is not in the table');
    const size = itemBytes(marshall(proto, { removeUndefinedValues: true }));
    const deadline = now() + options.dynamoDbBudgetSeconds * 1000;
    const steps: ScaleStep[] = [];
    let loaded = 0;
    let loadingMs = 0;
    let stoppedAt: DynamoDbScale['stoppedAt'];
    for (const target of sizes) {
      const started = now();
      let next = loaded;
      const worker = async () => {
        while (next < target && now() < deadline) {
          const from = next + 1;
          next = Math.min(target, next + 25);
          const items = [];
          for (let i = from; i <= next; i++) {
            items.push({
              PutRequest: {
                Item: { ...proto, pk: scopedKey({ accountId: account, operation: OPERATION, key: loadedKey(i) }) },
              },
            });
          }
          let pending: typeof items | undefined = items;
          while (pending?.length) {
            const out = await variant.documentClient.send(
              new BatchWriteCommand({ RequestItems: { [table]: pending } }),
            );
            pending = out.UnprocessedItems?.[table] as typeof items | undefined;
          }
        }
      };
      await Promise.all(Array.from({ length: 8 }, worker));
      loadingMs += now() - started;
      if (next < target) {
        stoppedAt = { size: target, loaded: next, budgetSeconds: options.dynamoDbBudgetSeconds };
        loaded = next;
        break;
      }
      loaded = target;
      const first: number[] = [];
      const replay: number[] = [];
      let unexpected = 0;
      for (let i = 0; i < options.calls + WARMUP; i++) {
        let t = now();
        const created = await variant.call(paymentEvent(account, randomUUID(), CARD));
        const firstMs = now() - t;
        t = now();
        const replayed = await variant.call(
          paymentEvent(account, loadedKey(1 + Math.floor(Math.random() * loaded)), CARD),
        );
        const replayMs = now() - t;
        if (i < WARMUP) continue;
        first.push(firstMs);
        replay.push(replayMs);
        if (created !== 'created') unexpected += 1;
        if (replayed !== 'replay') unexpected += 1;
      }
      steps.push({
        records: target,
        loadMs: now() - started,
        first: summarize(first),
        replay: summarize(replay),
        unexpected,
      });
    }
    return {
      steps,
      ...(stoppedAt ? { stoppedAt } : {}),
      itemBytes: size,
      itemsPerSecond: loaded / Math.max(loadingMs / 1000, 0.001),
    };
  } finally {
    variant.close();
  }
}

/**
 * `npx tsx --conditions=keystone-source bench/scale.ts`: this part alone, against a PostgreSQL and a DynamoDB Local
 * of its own, printed as JSON (BENCH_SCALE_CALLS, BENCH_SCALE_DYNAMODB_SECONDS).
 */
if (require.main === module) {
  void (async () => {
    const { startDynamoDbLocal } = await import('@keystone-idempotency/local-aws/dynamodb-local');
    const { startBenchPostgres } = await import('./stores');
    const [db, postgres] = await Promise.all([startDynamoDbLocal(), startBenchPostgres()]);
    try {
      const result = await measureScale({
        postgresUrl: postgres.url,
        dynamoDbEndpoint: db.endpoint,
        calls: Number(process.env.BENCH_SCALE_CALLS ?? 300),
        dynamoDbBudgetSeconds: Number(process.env.BENCH_SCALE_DYNAMODB_SECONDS ?? 90),
        ...(process.env.BENCH_SCALE_SIZES ? { sizes: process.env.BENCH_SCALE_SIZES.split(',').map(Number) } : {}),
      });
      console.log(JSON.stringify(result, null, 2));
    } finally {
      await Promise.all([db.stop(), postgres.stop()]);
    }
  })();
}
