import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startApiGateway } from '@keystone-idempotency/local-aws/api-gateway';
import type { LocalLog } from '@keystone-idempotency/local-aws/log';
import { startSourceFunctions } from '@keystone-idempotency/local-aws/source-functions';
import autocannon from 'autocannon';
import { BUNDLE_CONDITIONS } from '../lib/infra/library-source';
import { type LocalStack, startLocalStack } from '../lib/local/stack';
import { type Sandbox, startSandbox } from '../lib/sandbox/processor';
import { interleave, type LatencySummary, now, summarize } from './measure';
import { CARD } from './payment-flow';

/**
 * End to end over HTTP: autocannon (127.0.0.1 only, a fixed number of requests) against the local stack, which runs
 * the deployed handler code behind the emulated API Gateway and its Lambda authorizer, and against the same route
 * served by bench/payments-no-idempotency.ts.
 */
export const API_NAMES = ['idempotent', 'no-idempotency'] as const;
export type ApiName = (typeof API_NAMES)[number];
export const SCENARIOS = ['first', 'replay', 'storm'] as const;
export type Scenario = (typeof SCENARIOS)[number];

export interface HttpOptions {
  readonly dynamoDbEndpoint: string;
  /** The DynamoDB Local JVM, whose CPU time is read from /proc (Linux) to show where each request's time goes. */
  readonly dynamoDbPid: number;
  /** Requests per API for the first-request and replay scenarios, split into interleaved slices. */
  readonly requests: number;
  /** Unmeasured first requests per API beforehand, so neither pays for cold code paths and a cold JVM. */
  readonly warmup: number;
  readonly slices: number;
  readonly connections: number;
  /** Double-tap storms per API: `stormWidth` connections, one request each, all with one fresh key. */
  readonly stormRounds: number;
  readonly stormWidth: number;
}

export interface HttpScenarioResult {
  readonly api: ApiName;
  readonly scenario: Scenario;
  readonly requests: number;
  readonly connections: number;
  readonly requestsPerSecond: number;
  readonly latencyMs: LatencySummary;
  readonly statuses: Readonly<Record<string, number>>;
  /** Responses carrying `Idempotent-Replayed: true`. */
  readonly replayed: number;
  /** Charges the sandbox processor made during the scenario: the money that moved. */
  readonly charges: number;
  /** Storms only: did each round move money exactly once (idempotent API)? */
  readonly correct?: boolean;
  /**
   * CPU time per request: this Node process (gateway, handlers, sandbox processor, and autocannon itself, alike for
   * both APIs) and the DynamoDB Local JVM. Undefined where /proc is not available.
   */
  readonly cpuMsPerRequest: { readonly node: number; readonly dynamoDb: number | undefined };
}

export interface HttpResult {
  readonly results: HttpScenarioResult[];
  /** Anything the local gateway logged as an error (handler failures, timeouts). */
  readonly gatewayErrors: number;
}

const API_KEY = 'sk_bench';
const ACCOUNT = 'acct_bench';
/** Mirrors lib/local/stack.ts: integration < function timeout, so both APIs answer a slow handler alike. */
const FUNCTION_TIMEOUT_MS = 10_000;
const INTEGRATION_TIMEOUT_MS = 9_000;

export async function measureHttp(options: HttpOptions): Promise<HttpResult> {
  let gatewayErrors = 0;
  const log: LocalLog = {
    info: () => undefined,
    error: (message, details) => {
      if (gatewayErrors++ < 3) console.error(`  gateway: ${message}`, details ?? '');
    },
  };
  // The sandbox is started here, without a webhook URL. The stack's own sandbox would post a signed webhook for every
  // charge, and the webhook receiver and settlement consumer would then do their work in this same process while the
  // payments route is being measured (and the API without idempotency has no such route).
  const sandbox = await startSandbox({ port: 0 });
  let stack: LocalStack | undefined;
  let plain: PlainApi | undefined;
  try {
    stack = await startLocalStack({
      env: {
        PORT: '0',
        LOCAL_API_KEYS: `${API_KEY}:${ACCOUNT}`,
        DYNAMODB_ENDPOINT: options.dynamoDbEndpoint,
        PROCESSOR_URL: sandbox.url,
        IDEMPOTENCY_TABLE: 'bench-http-idempotency',
        PAYMENTS_TABLE: 'bench-http-payments',
      },
      log,
    });
    plain = await startPlainApi(stack, sandbox.url, log);
    const run: Run = {
      urls: { idempotent: stack.apiUrl, 'no-idempotency': plain.url },
      sandbox,
      options,
      cpu: cpuSampler(options.dynamoDbPid),
    };
    const results = [...(await firstRequests(run)), await replays(run), ...(await storms(run))];
    return { results, gatewayErrors };
  } finally {
    await plain?.close();
    await stack?.stop();
    await sandbox.close();
  }
}

/**
 * The same POST /payments route, authorizer and timeouts as the local stack, with the no-idempotency handler. Its
 * functions run the way the stack runs its own, from their sources bundled and run in execution environments
 * (packages/local-aws/src/source-functions.ts), so that both APIs pay the same hop from the gateway to the handler.
 */
async function startPlainApi(stack: LocalStack, processorUrl: string, log: LocalLog): Promise<PlainApi> {
  const functions = await startSourceFunctions({
    functions: [
      { name: 'payments-no-idempotency', entry: join(__dirname, 'payments-no-idempotency.ts') },
      { name: 'authorizer', entry: join(__dirname, '..', 'functions', 'authorizer.ts') },
    ],
    environment: {
      DYNAMODB_ENDPOINT: stack.databaseUrl,
      PAYMENTS_TABLE: stack.tables.payments,
      PROCESSOR_URL: processorUrl,
      POWERTOOLS_METRICS_DISABLED: 'true',
    },
    tsconfig: join(__dirname, '..', 'tsconfig.json'),
    // The library by name, to its sources, as the stack's own functions are bundled (lib/local/service-functions.ts).
    conditions: [...BUNDLE_CONDITIONS],
  });
  try {
    const api = await startApiGateway({
      port: 0,
      routes: [
        {
          method: 'POST',
          resource: '/payments',
          handler: functions.handlers.get('payments-no-idempotency')!,
          authorizer: { handler: functions.handlers.get('authorizer')!, functionName: 'authorizer' },
          timeoutMs: FUNCTION_TIMEOUT_MS,
        },
      ],
      integrationTimeoutMs: INTEGRATION_TIMEOUT_MS,
      functionTimeoutMs: FUNCTION_TIMEOUT_MS,
      log,
    });
    return {
      url: api.url,
      close: async () => {
        await api.close();
        await functions.stop();
      },
    };
  } catch (error) {
    await functions.stop();
    throw error;
  }
}

interface PlainApi {
  readonly url: string;
  close(): Promise<void>;
}

/** What every scenario works with. */
interface Run {
  readonly urls: Record<ApiName, string>;
  readonly sandbox: Sandbox;
  readonly options: HttpOptions;
  readonly cpu: () => CpuTimes;
}

/** A fresh Idempotency-Key on every request, set per request by autocannon's `setupRequest`. */
async function firstRequests({ urls, sandbox, options, cpu }: Run): Promise<HttpScenarioResult[]> {
  for (const api of API_NAMES) {
    await fire(urls[api], { connections: options.connections, amount: options.warmup, key: 'fresh' }, cpu);
  }
  const perSlice = Math.ceil(options.requests / options.slices);
  const shots = new Map<ApiName, Shot[]>(API_NAMES.map((api) => [api, []]));
  const charges = new Map<ApiName, number>(API_NAMES.map((api) => [api, 0]));
  await interleave(API_NAMES, options.slices, async (api) => {
    const before = sandbox.charges().length;
    const shot = await fire(urls[api], { connections: options.connections, amount: perSlice, key: 'fresh' }, cpu);
    shots.get(api)?.push(shot);
    charges.set(api, (charges.get(api) ?? 0) + sandbox.charges().length - before);
  });
  return API_NAMES.map((api) =>
    scenarioResult(api, 'first', options.connections, shots.get(api) ?? [], charges.get(api) ?? 0),
  );
}

/** One key, completed once beforehand, then sent again and again. */
async function replays({ urls, sandbox, options, cpu }: Run): Promise<HttpScenarioResult> {
  const url = urls.idempotent;
  const key = `replay-${randomUUID()}`;
  const original = await fetch(`${url}/payments`, {
    method: 'POST',
    headers: headers(key),
    body: JSON.stringify(CARD),
  });
  if (original.status !== 201) throw new Error(`could not create the replayed payment: ${original.status}`);
  const before = sandbox.charges().length;
  const shots: Shot[] = [];
  const perSlice = Math.ceil(options.requests / options.slices);
  for (let slice = 0; slice < options.slices; slice++) {
    shots.push(await fire(url, { connections: options.connections, amount: perSlice, key }, cpu));
  }
  return scenarioResult('idempotent', 'replay', options.connections, shots, sandbox.charges().length - before);
}

/**
 * The double tap, 50 wide: `stormWidth` connections each send the same request with one fresh key at once. The
 * idempotent API must move money once per storm; the other moves it once per request.
 */
async function storms({ urls, sandbox, options, cpu }: Run): Promise<HttpScenarioResult[]> {
  const shots = new Map<ApiName, Shot[]>(API_NAMES.map((api) => [api, []]));
  const charges = new Map<ApiName, number>(API_NAMES.map((api) => [api, 0]));
  let everyStormChargedOnce = true;
  await interleave(API_NAMES, options.stormRounds, async (api) => {
    const before = sandbox.charges().length;
    const key = `storm-${randomUUID()}`;
    const shot = await fire(urls[api], { connections: options.stormWidth, amount: options.stormWidth, key }, cpu);
    const charged = sandbox.charges().length - before;
    if (api === 'idempotent' && charged !== 1) everyStormChargedOnce = false;
    shots.get(api)?.push(shot);
    charges.set(api, (charges.get(api) ?? 0) + charged);
  });
  return API_NAMES.map((api) => ({
    ...scenarioResult(api, 'storm', options.stormWidth, shots.get(api) ?? [], charges.get(api) ?? 0),
    ...(api === 'idempotent' ? { correct: everyStormChargedOnce } : {}),
  }));
}

/** One autocannon run: every response's latency and status, how many were replays, and the CPU it took. */
interface Shot {
  readonly latencies: number[];
  readonly statuses: Record<string, number>;
  readonly replayed: number;
  readonly wallMs: number;
  readonly nodeCpuMs: number;
  readonly dynamoDbCpuMs: number | undefined;
}

/** CPU time used so far, in ms, by this process and by the DynamoDB Local JVM (all its threads). */
interface CpuTimes {
  readonly node: number;
  readonly dynamoDb: number | undefined;
}

function cpuSampler(jvmPid: number): () => CpuTimes {
  const ticksPerSecond = clockTicksPerSecond();
  return () => {
    const usage = process.cpuUsage();
    let dynamoDb: number | undefined;
    try {
      // /proc/<pid>/stat: after the parenthesised command name, utime and stime are the 12th and 13th fields.
      const stat = readFileSync(`/proc/${jvmPid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      dynamoDb = ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond;
    } catch {
      dynamoDb = undefined;
    }
    return { node: (usage.user + usage.system) / 1000, dynamoDb };
  };
}

function clockTicksPerSecond(): number {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
}

function headers(key?: string): Record<string, string> {
  return {
    authorization: `Bearer ${API_KEY}`,
    'content-type': 'application/json',
    ...(key ? { 'idempotency-key': key } : {}),
  };
}

function fire(
  url: string,
  shot: { connections: number; amount: number; key: string | 'fresh' },
  cpu: () => CpuTimes,
): Promise<Shot> {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let replayed = 0;
  const fresh = shot.key === 'fresh';
  return new Promise((resolve, reject) => {
    const cpuBefore = cpu();
    const started = now();
    // autocannon ends a run on its one-second tick, so its own duration overstates a short run: the wall time is
    // taken to the last response instead.
    let lastResponse = started;
    const instance = autocannon(
      {
        url: `${url}/payments`,
        method: 'POST',
        connections: shot.connections,
        amount: shot.amount,
        timeout: 30,
        headers: headers(fresh ? undefined : shot.key),
        body: JSON.stringify(CARD),
        requests: [
          {
            method: 'POST',
            path: '/payments',
            ...(fresh
              ? {
                  setupRequest: (request) => ({
                    ...request,
                    headers: { ...request.headers, 'idempotency-key': randomUUID() },
                  }),
                }
              : {}),
            onResponse: (_status, _body, _context, responseHeaders) => {
              const value = Object.entries(responseHeaders ?? {}).find(
                ([name]) => name.toLowerCase() === 'idempotent-replayed',
              )?.[1];
              if (value === 'true') replayed++;
            },
          },
        ],
      },
      (error) => {
        if (error) reject(error);
        else {
          const cpuAfter = cpu();
          resolve({
            latencies,
            statuses,
            replayed,
            wallMs: lastResponse - started,
            nodeCpuMs: cpuAfter.node - cpuBefore.node,
            dynamoDbCpuMs:
              cpuAfter.dynamoDb === undefined || cpuBefore.dynamoDb === undefined
                ? undefined
                : cpuAfter.dynamoDb - cpuBefore.dynamoDb,
          });
        }
      },
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      lastResponse = now();
      latencies.push(responseTime);
      statuses[statusCode] = (statuses[statusCode] ?? 0) + 1;
    });
  });
}

function scenarioResult(
  api: ApiName,
  scenario: Scenario,
  connections: number,
  shots: readonly Shot[],
  charges: number,
): HttpScenarioResult {
  const latencies = shots.flatMap((shot) => shot.latencies);
  const statuses: Record<string, number> = {};
  for (const shot of shots) {
    for (const [status, count] of Object.entries(shot.statuses)) statuses[status] = (statuses[status] ?? 0) + count;
  }
  const wallMs = shots.reduce((sum, shot) => sum + shot.wallMs, 0);
  const count = Math.max(latencies.length, 1);
  const jvm = shots.every((shot) => shot.dynamoDbCpuMs !== undefined)
    ? shots.reduce((sum, shot) => sum + (shot.dynamoDbCpuMs ?? 0), 0) / count
    : undefined;
  return {
    api,
    scenario,
    requests: latencies.length,
    connections,
    requestsPerSecond: latencies.length / (wallMs / 1000),
    latencyMs: summarize(latencies),
    statuses,
    replayed: shots.reduce((sum, shot) => sum + shot.replayed, 0),
    charges,
    cpuMsPerRequest: { node: shots.reduce((sum, shot) => sum + shot.nodeCpuMs, 0) / count, dynamoDb: jvm },
  };
}
