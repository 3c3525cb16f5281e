import { randomUUID } from 'node:crypto';
import type { LocalLog } from '@keystone-idempotency/local-aws/log';
import autocannon from 'autocannon';
import { type LocalStack, startLocalStack } from '../lib/local/stack';
import type { Charge } from '../lib/sandbox/charges';
import { startSandbox } from '../lib/sandbox/processor';
import { type LatencySummary, now, summarize } from './measure';
import { CARD } from './payment-flow';

/**
 * Sustained load (issue 25 §4): autocannon against `POST /payments` on the local stack, on each store, for a minute at
 * the highest rate this machine holds. The stack is the one `npm start` runs (the emulated API Gateway, the Lambda
 * authorizer, the payments handler bundled as CDK bundles it, each invocation in an execution environment of its own),
 * with the sandbox processor beside it and no webhooks, so that only the payments route does work.
 *
 * "The highest rate this machine holds" is found, not assumed: autocannon runs closed-loop (each connection sends its
 * next request when its last one is answered), so the rate is what the stack answers at that concurrency; short
 * probes at a few concurrencies pick the one with the most requests per second, and the minute runs at it. Then the
 * same minute again with half the requests repeating a key already answered (each a replay), to show how the figure
 * moves when retries are half the traffic.
 */
export const SUSTAINED_STORES = ['dynamodb', 'postgres'] as const;
export type SustainedStore = (typeof SUSTAINED_STORES)[number];
export const SUSTAINED_MIXES = ['unique', 'half-repeated'] as const;
export type SustainedMix = (typeof SUSTAINED_MIXES)[number];

export interface SustainedOptions {
  readonly dynamoDbEndpoint: string;
  readonly durationSeconds: number;
  /** Closed-loop concurrencies probed for `probeSeconds` each before the measured runs. */
  readonly probeConnections: readonly number[];
  readonly probeSeconds: number;
}

export interface SustainedRun {
  readonly store: SustainedStore;
  readonly mix: SustainedMix;
  readonly connections: number;
  readonly durationSeconds: number;
  readonly requests: number;
  readonly requestsPerSecond: number;
  readonly latencyMs: LatencySummary;
  readonly statuses: Readonly<Record<string, number>>;
  readonly serverErrors: number;
  /** Requests that carried a key already answered (half the traffic in the `half-repeated` mix). */
  readonly repeats: number;
  /** Responses carrying `Idempotent-Replayed: true`. */
  readonly replayed: number;
  /** Distinct keys sent, and of those the ones answered 201 as a first request. */
  readonly keys: number;
  readonly created: number;
  /** Charges the sandbox processor made for this run's keys, counted once the stack is quiet after it. */
  readonly charges: number;
  /** Keys charged more than once: must be none. */
  readonly chargedTwice: number;
  /** Keys charged whose request was still in flight when the run ended (cut off, not answered): each charged once. */
  readonly chargedInFlight: number;
  /** One charge per created key, none twice, none for a key never sent, and no 5xx. */
  readonly correct: boolean;
}

export interface SustainedProbe {
  readonly store: SustainedStore;
  readonly connections: number;
  readonly requestsPerSecond: number;
  readonly p99: number;
  readonly serverErrors: number;
}

export interface SustainedResult {
  readonly runs: SustainedRun[];
  readonly probes: SustainedProbe[];
  /** Anything the local gateway logged as an error (handler failures, timeouts), per store. */
  readonly gatewayErrors: Readonly<Record<SustainedStore, number>>;
}

const API_KEY = 'sk_sustained';
const ACCOUNT = 'acct_sustained';

export async function measureSustained(options: SustainedOptions): Promise<SustainedResult> {
  const runs: SustainedRun[] = [];
  const probes: SustainedProbe[] = [];
  const gatewayErrors: Record<SustainedStore, number> = { dynamodb: 0, postgres: 0 };
  for (const store of SUSTAINED_STORES) {
    const log: LocalLog = {
      info: () => undefined,
      error: (message, details) => {
        if (gatewayErrors[store]++ < 3) console.error(`  gateway (${store}): ${message}`, details ?? '');
      },
    };
    const sandbox = await startSandbox({ port: 0 });
    let stack: LocalStack | undefined;
    try {
      stack = await startLocalStack({
        env: {
          PORT: '0',
          STORE: store,
          LOCAL_API_KEYS: `${API_KEY}:${ACCOUNT}`,
          PROCESSOR_URL: sandbox.url,
          ...(store === 'dynamodb'
            ? {
                DYNAMODB_ENDPOINT: options.dynamoDbEndpoint,
                IDEMPOTENCY_TABLE: 'bench-sustained-idempotency',
                PAYMENTS_TABLE: 'bench-sustained-payments',
              }
            : {}),
        },
        log,
      });
      const url = stack.apiUrl;
      const charges = () => sandbox.charges();
      // Warm every execution environment the probes will use, so no probe pays for bundles loading.
      const widest = Math.max(...options.probeConnections);
      await load(url, { connections: widest, mix: 'unique', amount: widest * 4 }, charges);
      let best: SustainedProbe | undefined;
      for (const connections of options.probeConnections) {
        const probe = await load(url, { connections, mix: 'unique', seconds: options.probeSeconds }, charges);
        const row = {
          store,
          connections,
          requestsPerSecond: probe.requestsPerSecond,
          p99: probe.latencyMs.p99,
          serverErrors: probe.serverErrors,
        };
        probes.push(row);
        if (probe.serverErrors === 0 && (!best || row.requestsPerSecond > best.requestsPerSecond)) best = row;
      }
      const connections = best?.connections ?? Math.min(...options.probeConnections);
      for (const mix of SUSTAINED_MIXES) {
        const run = await load(url, { connections, mix, seconds: options.durationSeconds }, charges);
        runs.push({ store, mix, ...run });
      }
    } finally {
      await stack?.stop();
      await sandbox.close();
    }
  }
  return { runs, probes, gatewayErrors };
}

type Load = Omit<SustainedRun, 'store' | 'mix'>;

/**
 * One closed-loop autocannon run of `seconds` (or `amount` requests). Each connection sends one request at a time,
 * so the key a request carries is known when its answer arrives: a connection's context holds it. In the
 * `half-repeated` mix each request, with probability one half, repeats a key some earlier request had answered 201.
 */
function load(
  url: string,
  shot: { connections: number; mix: SustainedMix; seconds?: number; amount?: number },
  charges: () => readonly Charge[],
): Promise<Load> {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  const answered: string[] = [];
  const sent = new Set<string>();
  const createdKeys = new Set<string>();
  let repeats = 0;
  let replayed = 0;
  const chargesBefore = charges().length;
  const started = now();
  let lastResponse = started;
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: `${url}/payments`,
        method: 'POST',
        connections: shot.connections,
        ...(shot.seconds !== undefined ? { duration: shot.seconds } : { amount: shot.amount ?? 1 }),
        timeout: 30,
        headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify(CARD),
        requests: [
          {
            method: 'POST',
            path: '/payments',
            setupRequest: (request, context) => {
              const repeat = shot.mix === 'half-repeated' && answered.length > 0 && Math.random() < 0.5;
              const key = repeat ? (answered[Math.floor(Math.random() * answered.length)] as string) : randomUUID();
              if (repeat) repeats++;
              sent.add(key);
              (context as { key?: string }).key = key;
              return { ...request, headers: { ...request.headers, 'idempotency-key': key } };
            },
            onResponse: (status, _body, context, responseHeaders) => {
              const key = (context as { key?: string }).key as string;
              const replay =
                Object.entries(responseHeaders ?? {}).find(
                  ([name]) => name.toLowerCase() === 'idempotent-replayed',
                )?.[1] === 'true';
              if (replay) replayed++;
              if (status === 201 && !replay) {
                createdKeys.add(key);
                answered.push(key);
              }
            },
          },
        ],
      },
      (error) => {
        if (error) {
          reject(error);
          return;
        }
        const wallMs = lastResponse - started;
        quiet(charges)
          .then(() => {
            const perKey = new Map<string, number>();
            let foreign = 0;
            for (const charge of charges().slice(chargesBefore)) {
              const key = clientKeyOf(charge.metadata.operation_key);
              if (key === undefined || !sent.has(key)) foreign++;
              else perKey.set(key, (perKey.get(key) ?? 0) + 1);
            }
            const chargedTwice = [...perKey.values()].filter((count) => count > 1).length;
            const chargedInFlight = [...perKey.keys()].filter((key) => !createdKeys.has(key)).length;
            const everyCreatedCharged = [...createdKeys].every((key) => perKey.get(key) === 1);
            resolve(summary(wallMs, { perKey, foreign, chargedTwice, chargedInFlight, everyCreatedCharged }));
          })
          .catch(reject);
      },
    );
    const summary = (
      wallMs: number,
      found: {
        perKey: Map<string, number>;
        foreign: number;
        chargedTwice: number;
        chargedInFlight: number;
        everyCreatedCharged: boolean;
      },
    ): Load => {
      const serverErrors = Object.entries(statuses)
        .filter(([status]) => Number(status) >= 500)
        .reduce((sum, [, count]) => sum + count, 0);
      return {
        connections: shot.connections,
        durationSeconds: wallMs / 1000,
        requests: latencies.length,
        requestsPerSecond: latencies.length / (wallMs / 1000),
        latencyMs: summarize(latencies),
        statuses,
        serverErrors,
        repeats,
        replayed,
        keys: sent.size,
        created: createdKeys.size,
        charges: [...found.perKey.values()].reduce((sum, count) => sum + count, 0) + found.foreign,
        chargedTwice: found.chargedTwice,
        chargedInFlight: found.chargedInFlight,
        correct: serverErrors === 0 && found.chargedTwice === 0 && found.foreign === 0 && found.everyCreatedCharged,
      };
    };
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      lastResponse = now();
      latencies.push(responseTime);
      statuses[statusCode] = (statuses[statusCode] ?? 0) + 1;
    });
  });
}

/**
 * Waits until no charge has been made for a second (at most 30 s): requests cut off when a run ends are still being
 * handled by the stack, and their charges belong to the run's count.
 */
async function quiet(charges: () => readonly Charge[]): Promise<void> {
  const deadline = now() + 30_000;
  let count = charges().length;
  let still = now();
  while (now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    const next = charges().length;
    if (next !== count) {
      count = next;
      still = now();
    } else if (now() - still >= 1000) return;
  }
}

/** The client's key in a charge's `operation_key`: the stored key `account|operation|key` (engine/key.ts). */
function clientKeyOf(operationKey: string | undefined): string | undefined {
  const parts = operationKey?.split('|');
  return parts && parts.length >= 3 ? parts.slice(2).join('|') : undefined;
}
