/**
 * The Redis store beside Powertools' cache persistence layer, on one redis-server this section starts (and stops):
 * the same `@redis/client`, each variant's client through a RESP proxy of its own that counts the commands it sends
 * (one round trip each: neither pipelines within a call). Per path (first request, replay, in-flight duplicate), the
 * two are interleaved call by call; then a 100-key duplicate storm per variant, where every key's effect (an INCR of
 * its counter) must have run exactly once.
 *
 * Ours stages the effect (`incrBy`), so it runs in the commit's script with the key's completion; Powertools' handler
 * runs it itself, before its completion (an unconditional SET): that is the difference in guarantees, not in counts.
 */
import { randomUUID } from 'node:crypto';
import { IdempotencyConfig, makeIdempotent as powertoolsIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import { type RedisFaultProxy, startRedisFaultProxy } from '@keystone-idempotency/local-aws/redis-fault-proxy';
import { type RedisLocal, startRedisLocal } from '@keystone-idempotency/local-aws/redis-local';
import { createClient } from '@redis/client';
import type { Context } from 'aws-lambda';
import { makeIdempotent, OperationInFlightError } from 'keystone-idempotency';
import { RedisStore } from 'keystone-idempotency/redis';
import { interleave, now, pool, summarize } from './measure';
import type { CorrectnessCheck } from './targets';

export const REDIS_PATHS = ['first', 'replay', 'in_flight'] as const;
export type RedisPath = (typeof REDIS_PATHS)[number];
export const REDIS_VARIANTS = {
  ours: 'keystone RedisStore',
  powertools: 'Powertools 2.35 CachePersistenceLayer',
} as const;
export type RedisVariant = keyof typeof REDIS_VARIANTS;

export interface RedisRow {
  readonly variant: RedisVariant;
  readonly path: RedisPath;
  /** Commands sent per call (min, max). */
  readonly commands: { readonly min: number; readonly max: number };
  readonly p50: number;
  readonly p99: number;
  /** Calls that did not end as the path expects (a first request that did not run, a duplicate that did). */
  readonly unexpected: number;
}

export interface RedisStorm {
  readonly variant: RedisVariant;
  readonly keys: number;
  readonly calls: number;
  readonly wallMs: number;
  readonly commands: number;
  /** Keys whose effect ran exactly once; every key must. */
  readonly keysWithOneEffect: number;
  readonly errors: readonly string[];
}

export interface RedisResult {
  readonly server: string;
  readonly calls: number;
  readonly rows: readonly RedisRow[];
  readonly storms: readonly RedisStorm[];
}

const newClient = (url: string) => createClient({ url });
type Client = ReturnType<typeof newClient>;
interface Order {
  readonly id: string;
  readonly amount: number;
}
/** What a call's work is told: when it runs, and what to wait for before it commits. Not part of the payload. */
interface Work {
  readonly hold?: Promise<void>;
  onRun?(): void;
}
/** The event the idempotent functions see: the order, and (outside their key and fingerprint) the call's work. */
type Call = Order & { readonly work: Work };

/** Runs `charge` on the order, telling whether its work ran. */
async function called(charge: (event: Call) => Promise<unknown>, order: Order, work: Work = {}) {
  let ran = false;
  await charge({
    ...order,
    work: {
      ...work,
      onRun: () => {
        ran = true;
        work.onRun?.();
      },
    },
  });
  return ran ? ('ran' as const) : ('replayed' as const);
}
/** One variant: the idempotent function, its counter of commands, and the effect's witness. */
interface Variant {
  readonly name: RedisVariant;
  readonly proxy: RedisFaultProxy;
  readonly client: Client;
  /** Runs the idempotent function; `work.hold` keeps its work in progress until it resolves. */
  call(order: Order, work?: Work): Promise<'ran' | 'replayed' | 'in_flight'>;
  effectsOf(order: Order): Promise<number>;
}

const STORM = { keys: 100, callsPerKey: 10, concurrency: 50 } as const;
const PREFIX = 'bench';

export async function measureRedis(options: {
  readonly calls: number;
  readonly warmup: number;
  readonly stormRounds: number;
}): Promise<RedisResult> {
  const server = await startRedisLocal();
  const variants: Variant[] = [];
  try {
    const witness = await connected(server.url);
    variants.push(await oursOn(server, witness), await powertoolsOn(server, witness));
    const version = String((await witness.info('server')).match(/redis_version:(\S+)/)?.[1] ?? '?');
    const rows: RedisRow[] = [];
    for (const path of REDIS_PATHS) {
      const samples = new Map<RedisVariant, { ms: number[]; commands: number[]; unexpected: number }>();
      for (const variant of variants) samples.set(variant.name, { ms: [], commands: [], unexpected: 0 });
      await interleave(variants, options.warmup + options.calls, async (variant, round) => {
        const sample = await measureCall(variant, path);
        if (round < options.warmup) return;
        const into = samples.get(variant.name)!;
        into.ms.push(sample.ms);
        into.commands.push(sample.commands);
        if (!sample.expected) into.unexpected += 1;
      });
      for (const variant of variants) {
        const s = samples.get(variant.name)!;
        const latency = summarize(s.ms);
        rows.push({
          variant: variant.name,
          path,
          commands: { min: Math.min(...s.commands), max: Math.max(...s.commands) },
          p50: latency.p50,
          p99: latency.p99,
          unexpected: s.unexpected,
        });
      }
    }
    const storms: RedisStorm[] = [];
    await interleave(variants, options.stormRounds, async (variant) => {
      storms.push(await storm(variant));
    });
    await witness.close();
    return { server: `redis-server ${version}`, calls: options.calls, rows, storms };
  } finally {
    for (const variant of variants) {
      await variant.client.close().catch(() => undefined);
      await variant.proxy.close();
    }
    await server.stop();
  }
}

/** One call on `path`, timed, with the commands it sent. */
async function measureCall(
  variant: Variant,
  path: RedisPath,
): Promise<{ ms: number; commands: number; expected: boolean }> {
  const order = { id: randomUUID(), amount: 1200 };
  if (path === 'first') {
    variant.proxy.reset();
    const started = now();
    const outcome = await variant.call(order);
    return { ms: now() - started, commands: variant.proxy.commands().length, expected: outcome === 'ran' };
  }
  if (path === 'replay') {
    await variant.call(order);
    variant.proxy.reset();
    const started = now();
    const outcome = await variant.call(order);
    const effects = await variant.effectsOf(order);
    return {
      ms: now() - started,
      commands: variant.proxy.commands().length,
      expected: outcome === 'replayed' && effects === 1,
    };
  }
  // In flight: the first call holds its claim (its work waits on `release`) while the duplicate is measured.
  let release: () => void = () => undefined;
  const hold = new Promise<void>((resolve) => {
    release = resolve;
  });
  let working: () => void = () => undefined;
  const started = new Promise<void>((resolve) => {
    working = resolve;
  });
  const first = variant.call(order, { hold, onRun: working });
  await started; // its claim has landed: its work is running
  variant.proxy.reset();
  const begun = now();
  const outcome = await variant.call(order);
  const ms = now() - begun;
  const commands = variant.proxy.commands().length;
  release();
  await first;
  return { ms, commands, expected: outcome === 'in_flight' && (await variant.effectsOf(order)) === 1 };
}

/** 100 keys, 10 calls each, 50 in flight: every key's effect must run exactly once. */
async function storm(variant: Variant): Promise<RedisStorm> {
  const orders = Array.from({ length: STORM.keys }, () => ({ id: randomUUID(), amount: 500 }));
  const calls = STORM.keys * STORM.callsPerKey;
  const errors = new Set<string>();
  variant.proxy.reset();
  const started = now();
  await pool(calls, STORM.concurrency, async (index) => {
    const order = orders[index % STORM.keys]!;
    // A duplicate that found the key in flight comes back until it gets the stored result, as a client would.
    for (let attempt = 0; attempt < 200; attempt++) {
      const outcome = await variant.call(order).catch((error: unknown) => {
        errors.add(String((error as Error).message ?? error).slice(0, 120));
        return 'error' as const;
      });
      if (outcome !== 'in_flight') return;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  });
  const wallMs = now() - started;
  const commands = variant.proxy.commands().length;
  const counts = await Promise.all(orders.map((order) => variant.effectsOf(order)));
  return {
    variant: variant.name,
    keys: STORM.keys,
    calls,
    wallMs,
    commands,
    keysWithOneEffect: counts.filter((count) => count === 1).length,
    errors: [...errors],
  };
}

async function connected(url: string): Promise<Client> {
  const client = newClient(url);
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

async function oursOn(server: RedisLocal, witness: Client): Promise<Variant> {
  const proxy = await startRedisFaultProxy(server.url);
  const client = await connected(proxy.url);
  const store = new RedisStore({ client, prefix: PREFIX, leaseSeconds: 60 });
  const counter = (order: Order) => store.effectKey(`charges:${order.id}`);
  const charge = makeIdempotent(
    async (order: Call, idempotency) => {
      order.work.onRun?.();
      await order.work.hold;
      idempotency.stage({ incrBy: counter(order), by: 1 });
      return { charged: order.amount };
    },
    {
      store,
      name: 'charge',
      key: (order) => order.id,
      fingerprint: (order) => ({ id: order.id, amount: order.amount }),
    },
  );
  return {
    name: 'ours',
    proxy,
    client,
    async call(order, work) {
      try {
        return await called(charge, order, work);
      } catch (error) {
        if (error instanceof OperationInFlightError) return 'in_flight';
        throw error;
      }
    },
    effectsOf: async (order) => Number((await witness.get(counter(order))) ?? 0),
  };
}

async function powertoolsOn(server: RedisLocal, witness: Client): Promise<Variant> {
  const proxy = await startRedisFaultProxy(server.url);
  const client = await connected(proxy.url);
  const persistenceStore = new CachePersistenceLayer({ client });
  // No payloadValidationJmesPath: the cache layer's completion (an unconditional SET) drops the payload hash its claim
  // stored, so with validation on every replay throws IdempotencyValidationError (seen in 2.35.0).
  const config = new IdempotencyConfig({ eventKeyJmesPath: 'id' });
  const counter = (order: Order) => `powertools:charges:${order.id}`;
  // Without a Lambda context Powertools sets no in-progress expiry, and takes a record in progress for an orphan.
  config.registerLambdaContext(lambdaContext());
  const charge = powertoolsIdempotent(
    async (order: Call) => {
      order.work.onRun?.();
      await order.work.hold;
      await client.incr(counter(order)); // its own write, before the completion and apart from it
      return { charged: order.amount };
    },
    { persistenceStore, config },
  );
  return {
    name: 'powertools',
    proxy,
    client,
    async call(order, work) {
      try {
        return await called(charge, order, work);
      } catch (error) {
        if ((error as Error).name === 'IdempotencyAlreadyInProgressError') return 'in_flight';
        throw error;
      }
    },
    effectsOf: async (order) => Number((await witness.get(counter(order))) ?? 0),
  };
}

/** What Powertools reads from a Lambda context: the remaining time (15 minutes), which sets its in-progress expiry. */
function lambdaContext(): Context {
  return {
    awsRequestId: randomUUID(),
    functionName: 'bench-redis',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:local:000000000000:function:bench-redis',
    memoryLimitInMB: '512',
    logGroupName: '/aws/lambda/bench-redis',
    logStreamName: 'bench',
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => 15 * 60_000,
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/** Every call answered as its path expects, and every storm key's effect run exactly once: for both variants. */
export function redisCorrectness(result: RedisResult): CorrectnessCheck[] {
  return [
    ...result.rows.map((row) => ({
      check: `Redis, ${REDIS_VARIANTS[row.variant]} ${row.path}: every call answered as expected, the effect run once`,
      passed: row.unexpected === 0,
      detail: row.unexpected === 0 ? 'ok' : `${row.unexpected} unexpected`,
    })),
    ...result.storms.map((storm) => ({
      check: `Redis, ${REDIS_VARIANTS[storm.variant]} storm: one effect per key (${storm.keys} keys)`,
      passed: storm.keysWithOneEffect === storm.keys && storm.errors.length === 0,
      detail: `${storm.keysWithOneEffect}/${storm.keys} keys with one effect${storm.errors.length ? `; errors: ${storm.errors.join(' | ')}` : ''}`,
    })),
  ];
}
