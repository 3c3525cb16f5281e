import { randomBytes } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { ApiKeys, generateApiKey, parseApiKeyList } from '../payments/api-keys';
import { dynamoDbConfig } from '../runtime/clients';
import { numberEnv } from '../runtime/env';
import { startSandbox } from '../sandbox/processor';
import { sqsClient } from '../settlement/config';
import { idempotencyTable, paymentsTable } from '../tables/definitions';
import { ensureTable } from '../tables/ensure';
import { type Timings, timingViolations } from '../timing/timing';
import { type ApiGateway, type ProxyHandler, type Route, startApiGateway } from './api-gateway';
import { prepareDemo } from './demo';
import { startDynamoDbLocal } from './dynamodb-local';
import { freePort } from './free-port';
import { consoleLog, type LocalLog } from './log';
import { openApiRoute } from './openapi-route';
import { ensurePortsFree, portFromEnv } from './ports';
import { type Schedule, startSchedule } from './schedule';
import { createQueueWithDlq, type QueueWithDlq, startLocalSqs } from './sqs';
import { type SqsPoller, startSqsPoller } from './sqs-poller';

type Env = Record<string, string | undefined>;

/** Local Lambda timeouts, mirroring the deployed relation: integration < function < lease < visibility timeout. */
const API_FUNCTION_TIMEOUT_MS = 10_000;
const INTEGRATION_TIMEOUT_MS = 9_000;
const CONSUMER_TIMEOUT_MS = 10_000;
/** Six times the consumer's timeout, as AWS advises for an SQS event source. */
const SETTLEMENT_VISIBILITY_SECONDS = 60;
const SETTLEMENT_MAX_RECEIVE_COUNT = 5;
/** Batches the local event source mapping handles at once (the deployed one starts with five pollers). */
const SETTLEMENT_CONCURRENCY = 5;
const LEASE_SECONDS = 60;
const TTL_SECONDS = 24 * 60 * 60;
const PROCESSOR_TIMEOUT_MS = 8_000;
/** The completer's period locally: shorter than the deployed minute, so a demo shows recovery within seconds. */
const COMPLETER_INTERVAL_SECONDS = 10;

export interface LocalStackOptions {
  /** The environment to read settings from (default `process.env`); handlers see it merged into `process.env`. */
  readonly env?: Env;
  readonly log?: LocalLog;
}

export interface LocalStack {
  readonly apiUrl: string;
  readonly processorUrl: string;
  readonly sqsEndpoint: string;
  readonly settlementQueue: QueueWithDlq;
  readonly dynamoDbEndpoint: string;
  /** The double-tap demo page (lib/local/demo): `${apiUrl}/`. */
  readonly demoUrl: string;
  /** API keys seeded at start: the ones given in LOCAL_API_KEYS, or two generated demo accounts. */
  readonly apiKeys: readonly { apiKey: string; accountId: string }[];
  readonly tables: { readonly idempotency: string; readonly payments: string };
  stop(): Promise<void>;
}

/**
 * Starts the payments service on this machine, running the same handler code Lambda runs:
 * DynamoDB Local (unless `DYNAMODB_ENDPOINT` names one), the tables from the same definitions the CDK stack uses,
 * the sandbox processor and mailer on `PROCESSOR_PORT` (unless `PROCESSOR_URL` names one), SQS (unless
 * `SQS_ENDPOINT` names one) with the settlement queue and its DLQ, an emulated API Gateway on `PORT` with the Lambda
 * authorizer, and a poller that feeds the settlement consumer like Lambda's event source mapping.
 *
 * Each part can be given from outside, so a test can kill this process mid-request and start it again against the
 * same database and processor.
 */
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const env: Env = { ...process.env, ...options.env };
  const log = options.log ?? consoleLog;
  const stoppers: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const stopOne of stoppers.reverse()) {
      await stopOne().catch((error: unknown) => log.error('stop failed', { error: String(error) }));
    }
  };
  // Ports first: a port that is taken should fail now, not after DynamoDB Local and the rest have started.
  const apiPort = portFromEnv('PORT', 3000, env);
  const processorPort = portFromEnv('PROCESSOR_PORT', 0, env);
  await ensurePortsFree(env.PROCESSOR_URL ? [apiPort] : [apiPort, processorPort]);
  try {
    // The deployed stack refuses these relations at synth time; the local stack refuses them before it starts.
    const violations = timingViolations(localTimings(env));
    if (violations.length > 0) {
      throw new Error(`The local stack's timeouts are inconsistent:\n${violations.map((v) => `  - ${v}`).join('\n')}`);
    }
    if (!env.DYNAMODB_ENDPOINT) {
      const db = await startDynamoDbLocal();
      stoppers.push(() => db.stop());
      env.DYNAMODB_ENDPOINT = db.endpoint;
    }
    const tables = {
      idempotency: env[idempotencyTable.envVar] || 'keystone-local-idempotency',
      payments: env[paymentsTable.envVar] || 'keystone-local-payments',
    };
    env[idempotencyTable.envVar] = tables.idempotency;
    env[paymentsTable.envVar] = tables.payments;

    const client = new DynamoDBClient(dynamoDbConfig(env));
    stoppers.push(async () => client.destroy());
    await ensureTable(client, idempotencyTable, tables.idempotency);
    await ensureTable(client, paymentsTable, tables.payments);

    // The sandbox's webhooks need the API's URL before the API listens, so a free port is picked here.
    const port = apiPort.port === 0 ? await freePort() : apiPort.port;
    env.PROCESSOR_WEBHOOK_SECRET ||= `whsec_${randomBytes(16).toString('hex')}`;
    if (!env.PROCESSOR_URL) {
      const sandbox = await startSandbox({
        port: processorPort.port,
        webhookUrl: `http://127.0.0.1:${port}/webhooks/processor`,
        webhookSecret: env.PROCESSOR_WEBHOOK_SECRET,
      });
      stoppers.push(() => sandbox.close());
      env.PROCESSOR_URL = sandbox.url;
    }
    env.MAILER_URL ||= env.PROCESSOR_URL; // the sandbox is the mailer too

    const queues = await startQueues(env);
    stoppers.push(queues.stop);

    const apiKeys = await seedApiKeys(DynamoDBDocumentClient.from(client), tables.payments, env.LOCAL_API_KEYS);
    // The double-tap demo page (local only): its own demo account, and routes on the API's origin.
    const demo = await prepareDemo({
      apiKeys: new ApiKeys(DynamoDBDocumentClient.from(client), tables.payments),
      processorUrl: env.PROCESSOR_URL,
    });

    // CloudWatch metrics (EMF lines on stdout) mean nothing locally; set it to false to see them.
    env.POWERTOOLS_METRICS_DISABLED ??= 'true';
    // Handlers read their configuration at import (cold start), so the environment is set first.
    Object.assign(process.env, env);
    const api = await startApi(port, env, log, demo.routes);
    stoppers.push(() => api.close());
    const consumer = await startConsumer(queues, env, log);
    stoppers.push(() => consumer.stop());
    const completer = await startCompleter(env, log);
    stoppers.push(() => completer.stop());

    return {
      apiUrl: api.url,
      demoUrl: `${api.url}/`,
      processorUrl: env.PROCESSOR_URL,
      sqsEndpoint: queues.endpoint,
      settlementQueue: queues.settlement,
      dynamoDbEndpoint: env.DYNAMODB_ENDPOINT,
      apiKeys,
      tables,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

interface Queues {
  readonly endpoint: string;
  readonly client: SQSClient;
  readonly settlement: QueueWithDlq;
  stop(): Promise<void>;
}

/** SQS: the emulator (unless SQS_ENDPOINT names a running one), and the settlement queue with its DLQ. */
async function startQueues(env: Env): Promise<Queues> {
  let stop: () => Promise<void> = async () => {};
  let client: SQSClient;
  if (env.SQS_ENDPOINT) {
    client = sqsClient(env);
  } else {
    const sqs = await startLocalSqs();
    env.SQS_ENDPOINT = sqs.endpoint;
    client = sqs.client;
    stop = () => sqs.close();
  }
  const settlement = await createQueueWithDlq(client, env.SETTLEMENT_QUEUE_NAME || 'keystone-local-settlement', {
    maxReceiveCount: numberEnv('SETTLEMENT_MAX_RECEIVE_COUNT', SETTLEMENT_MAX_RECEIVE_COUNT, env),
    visibilityTimeoutSeconds: numberEnv('SETTLEMENT_VISIBILITY_SECONDS', SETTLEMENT_VISIBILITY_SECONDS, env),
  });
  env.SETTLEMENT_QUEUE_URL = settlement.queueUrl;
  env.SETTLEMENT_DLQ_URL = settlement.dlqUrl;
  return { endpoint: env.SQS_ENDPOINT, client, settlement, stop };
}

/**
 * The completer, run by a timer that stands in for the deployed EventBridge schedule (COMPLETER_INTERVAL_SECONDS):
 * it finishes payments whose client never came back and whose processor event never arrived.
 */
async function startCompleter(env: Env, log: LocalLog): Promise<Schedule> {
  const completer = await import('../../functions/payments-completer');
  return startSchedule({
    handler: completer.handler,
    functionName: 'payments-completer',
    periodMs: numberEnv('COMPLETER_INTERVAL_SECONDS', COMPLETER_INTERVAL_SECONDS, env) * 1000,
    timeoutMs: numberEnv('API_FUNCTION_TIMEOUT_MS', API_FUNCTION_TIMEOUT_MS, env),
    log,
  });
}

/** The local stack's timings, from the same variables its parts read, in the shared rules' terms. */
export function localTimings(env: Env): Timings {
  const apiFunctionMs = numberEnv('API_FUNCTION_TIMEOUT_MS', API_FUNCTION_TIMEOUT_MS, env);
  const visibilityMs = numberEnv('SETTLEMENT_VISIBILITY_SECONDS', SETTLEMENT_VISIBILITY_SECONDS, env) * 1000;
  return {
    leaseMs: numberEnv('IDEMPOTENCY_LEASE_SECONDS', LEASE_SECONDS, env) * 1000,
    ttlMs: numberEnv('IDEMPOTENCY_TTL_SECONDS', TTL_SECONDS, env) * 1000,
    apiIntegrationMs: integrationTimeoutMs(apiFunctionMs),
    processorTimeoutMs: numberEnv('PROCESSOR_TIMEOUT_MS', PROCESSOR_TIMEOUT_MS, env),
    queueVisibilityMs: visibilityMs,
    completerPeriodMs: numberEnv('COMPLETER_INTERVAL_SECONDS', COMPLETER_INTERVAL_SECONDS, env) * 1000,
    functions: [
      { name: 'payments-create', timeoutMs: apiFunctionMs, trigger: 'route', callsProcessor: true },
      { name: 'payments-get', timeoutMs: apiFunctionMs, trigger: 'route' },
      { name: 'webhook-receiver', timeoutMs: apiFunctionMs, trigger: 'route' },
      { name: 'authorizer', timeoutMs: apiFunctionMs, trigger: 'authorizer' },
      { name: 'settlement-consumer', timeoutMs: consumerTimeoutMs(env), trigger: 'queue' },
      { name: 'payments-completer', timeoutMs: apiFunctionMs, trigger: 'schedule', callsProcessor: true },
    ],
  };
}

function integrationTimeoutMs(apiFunctionMs: number): number {
  return Math.min(INTEGRATION_TIMEOUT_MS, apiFunctionMs - 500);
}

function consumerTimeoutMs(env: Env): number {
  return Math.min(
    numberEnv('CONSUMER_FUNCTION_TIMEOUT_MS', CONSUMER_TIMEOUT_MS, env),
    numberEnv('SETTLEMENT_VISIBILITY_SECONDS', SETTLEMENT_VISIBILITY_SECONDS, env) * 1000,
  );
}

/** The settlement consumer, fed by a poller that stands in for Lambda's SQS event source mapping. */
async function startConsumer(queues: Queues, env: Env, log: LocalLog): Promise<SqsPoller> {
  const consumer = await import('../../functions/settlement-consumer');
  return startSqsPoller({
    client: queues.client,
    queueUrl: queues.settlement.queueUrl,
    queueArn: queues.settlement.queueArn,
    handler: consumer.handler,
    functionName: 'settlement-consumer',
    functionTimeoutMs: consumerTimeoutMs(env),
    concurrency: SETTLEMENT_CONCURRENCY,
    log,
  });
}

async function startApi(port: number, env: Env, log: LocalLog, localRoutes: readonly Route[]): Promise<ApiGateway> {
  const [create, get, authorizer, webhook] = await Promise.all([
    import('../../functions/payments-create'),
    import('../../functions/payments-get'),
    import('../../functions/authorizer'),
    import('../../functions/webhook-receiver'),
  ]);
  const timeoutMs = numberEnv('API_FUNCTION_TIMEOUT_MS', API_FUNCTION_TIMEOUT_MS, env);
  const auth = { handler: authorizer.handler, functionName: 'authorizer' };
  const routes: Route[] = [
    { method: 'POST', resource: '/payments', handler: asProxyHandler(create.handler), authorizer: auth, timeoutMs },
    { method: 'GET', resource: '/payments/{id}', handler: asProxyHandler(get.handler), authorizer: auth, timeoutMs },
    // No authorizer: the processor authenticates with its HMAC signature, checked in the handler.
    { method: 'POST', resource: '/webhooks/processor', handler: asProxyHandler(webhook.handler), timeoutMs },
    openApiRoute(`http://127.0.0.1:${port}`),
    ...localRoutes,
  ];
  return startApiGateway({
    port,
    routes,
    integrationTimeoutMs: integrationTimeoutMs(timeoutMs),
    functionTimeoutMs: timeoutMs,
    // The deployed API answers its own errors (401, 504, ...) as problem+json; so does the local one.
    gatewayResponseFormat: 'problem',
    log,
  });
}

/**
 * A middy handler declares the context its middlewares add (the parsed body, the idempotency handle); Lambda, and
 * this gateway, pass a plain Context, which the middlewares then extend.
 */
function asProxyHandler(handler: unknown): ProxyHandler {
  return handler as ProxyHandler;
}

async function seedApiKeys(
  client: DynamoDBDocumentClient,
  table: string,
  list: string | undefined,
): Promise<{ apiKey: string; accountId: string }[]> {
  const keys = list
    ? parseApiKeyList(list)
    : [
        { apiKey: generateApiKey(), accountId: 'acct_demo_1' },
        { apiKey: generateApiKey(), accountId: 'acct_demo_2' },
      ];
  const store = new ApiKeys(client, table);
  for (const { apiKey, accountId } of keys) await store.register(apiKey, accountId);
  return keys;
}
