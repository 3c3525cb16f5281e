import { randomBytes } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { ApiKeys, generateApiKey, parseApiKeyList } from '../payments/api-keys';
import { dynamoDbConfig } from '../runtime/clients';
import { startSandbox } from '../sandbox/processor';
import { sqsClient } from '../settlement/config';
import { idempotencyTable, paymentsTable } from '../tables/definitions';
import { ensureTable } from '../tables/ensure';
import { type Timings, timingViolations } from '../timing/timing';
import { type ApiGateway, type Route, startApiGateway } from './api-gateway';
import type { DeployedStack } from './cloud-assembly';
import { prepareDemo } from './demo';
import { startDynamoDbLocal } from './dynamodb-local';
import { freePort } from './free-port';
import { consoleLog, type LocalLog } from './log';
import { openApiRoute } from './openapi-route';
import { ensurePortsFree, portFromEnv } from './ports';
import { type Schedule, startSchedule } from './schedule';
import { type ServiceHandlers, sourceHandlers } from './service-functions';
import { createQueueWithDlq, type QueueWithDlq, startLocalSqs } from './sqs';
import { type SqsPoller, startSqsPoller } from './sqs-poller';
import { deployedSettings, type StackSettings, stackSettings, timingsOf } from './stack-settings';

type Env = Record<string, string | undefined>;

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
 * authorizer, a poller that feeds the settlement consumer like Lambda's event source mapping, and a schedule for the
 * completer.
 *
 * The functions run from their TypeScript sources in this process, or, with `LOCAL_CDK_OUT` naming a synthesized
 * cloud assembly, from the very bundles it deploys (bundled-service.ts): each function in processes of its own with
 * its own environment from the template, and the emulators set up as the template sets up API Gateway, the queue
 * and the schedule. The README's local timing settings then override the template's values, for tests that can't
 * wait out a 90 s lease.
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
    // A cloud assembly that can't be read, like inconsistent timings, stops the start before anything runs.
    const deployed = env.LOCAL_CDK_OUT ? await loadDeployedStack(env.LOCAL_CDK_OUT, env.LOCAL_CDK_STACK) : undefined;
    const settings = stackSettings(env, deployed && deployedSettings(deployed));
    // The deployed stack refuses these relations at synth time; the local stack refuses them before it starts.
    const violations = timingViolations(timingsOf(settings));
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

    const queues = await startQueues(env, settings);
    stoppers.push(queues.stop);

    const apiKeys = await seedApiKeys(DynamoDBDocumentClient.from(client), tables.payments, env.LOCAL_API_KEYS);
    // The double-tap demo page (local only): its own demo account, and routes on the API's origin.
    const demo = await prepareDemo({
      apiKeys: new ApiKeys(DynamoDBDocumentClient.from(client), tables.payments),
      processorUrl: env.PROCESSOR_URL,
    });

    // Stopped after everything that invokes them (stoppers run in reverse).
    const handlers = deployed ? await startBundles(deployed, env, settings, log, stoppers) : await startSources(env);
    const api = await startApi(port, handlers, settings, log, demo.routes);
    stoppers.push(() => api.close());
    const consumer = await startConsumer(queues, handlers, settings, log);
    stoppers.push(() => consumer.stop());
    const completer = startCompleter(handlers, settings, log);
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

/** The functions from their sources, in this process: they read `process.env`, so the stack's settings go there. */
async function startSources(env: Env): Promise<ServiceHandlers> {
  // CloudWatch metrics (EMF lines on stdout) mean nothing locally; set it to false to see them.
  env.POWERTOOLS_METRICS_DISABLED ??= 'true';
  // Handlers read their configuration at import (cold start), so the environment is set first.
  Object.assign(process.env, env);
  return sourceHandlers();
}

/**
 * The functions from the bundles of a synthesized stack, each with its template's environment and the local
 * stand-ins for what only exists once deployed (bundled-environment.ts lists them, and why).
 */
async function startBundles(
  deployed: DeployedStack,
  env: Env,
  settings: StackSettings,
  log: LocalLog,
  stoppers: (() => Promise<void>)[],
): Promise<ServiceHandlers> {
  const { startBundledService } = await import('./bundled-service');
  const service = await startBundledService({
    stack: deployed,
    settings,
    local: {
      IDEMPOTENCY_TABLE: env[idempotencyTable.envVar],
      PAYMENTS_TABLE: env[paymentsTable.envVar],
      SETTLEMENT_QUEUE_URL: env.SETTLEMENT_QUEUE_URL,
      SETTLEMENT_DLQ_URL: env.SETTLEMENT_DLQ_URL,
      PROCESSOR_URL: env.PROCESSOR_URL,
      MAILER_URL: env.MAILER_URL,
      PROCESSOR_WEBHOOK_SECRET: env.PROCESSOR_WEBHOOK_SECRET,
      DYNAMODB_ENDPOINT: env.DYNAMODB_ENDPOINT,
      SQS_ENDPOINT: env.SQS_ENDPOINT,
    },
  });
  stoppers.push(() => service.stop());
  log.info(`functions from the bundles of ${deployed.stackName} in ${env.LOCAL_CDK_OUT}:`);
  for (const line of service.summary) log.info(`  ${line}`);
  return service.handlers;
}

/** Reads the cloud assembly (with the CDK's reader, loaded only when bundles are asked for). */
async function loadDeployedStack(directory: string, stackName: string | undefined): Promise<DeployedStack> {
  const { DeployedStack } = await import('./cloud-assembly');
  return DeployedStack.load(directory, stackName || undefined);
}

interface Queues {
  readonly endpoint: string;
  readonly client: SQSClient;
  readonly settlement: QueueWithDlq;
  stop(): Promise<void>;
}

/** SQS: the emulator (unless SQS_ENDPOINT names a running one), and the settlement queue with its DLQ. */
async function startQueues(env: Env, settings: StackSettings): Promise<Queues> {
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
    maxReceiveCount: settings.settlement.maxReceiveCount,
    visibilityTimeoutSeconds: settings.settlement.visibilitySeconds,
  });
  env.SETTLEMENT_QUEUE_URL = settlement.queueUrl;
  env.SETTLEMENT_DLQ_URL = settlement.dlqUrl;
  return { endpoint: env.SQS_ENDPOINT, client, settlement, stop };
}

/**
 * The completer, run by a timer that stands in for the deployed EventBridge schedule (COMPLETER_INTERVAL_SECONDS):
 * it finishes payments whose client never came back and whose processor event never arrived.
 */
function startCompleter(handlers: ServiceHandlers, settings: StackSettings, log: LocalLog): Schedule {
  return startSchedule({
    handler: handlers.paymentsCompleter,
    functionName: 'payments-completer',
    periodMs: settings.completerIntervalSeconds * 1000,
    timeoutMs: settings.timeoutsMs.paymentsCompleter,
    log,
  });
}

/** The local stack's timings, from the same variables its parts read, in the shared rules' terms. */
export function localTimings(env: Env): Timings {
  return timingsOf(stackSettings(env));
}

/** The settlement consumer, fed by a poller that stands in for Lambda's SQS event source mapping. */
async function startConsumer(
  queues: Queues,
  handlers: ServiceHandlers,
  settings: StackSettings,
  log: LocalLog,
): Promise<SqsPoller> {
  return startSqsPoller({
    client: queues.client,
    queueUrl: queues.settlement.queueUrl,
    queueArn: queues.settlement.queueArn,
    handler: handlers.settlementConsumer,
    functionName: 'settlement-consumer',
    functionTimeoutMs: settings.timeoutsMs.settlementConsumer,
    batchSize: settings.settlement.batchSize,
    concurrency: settings.settlement.concurrency,
    log,
  });
}

async function startApi(
  port: number,
  handlers: ServiceHandlers,
  settings: StackSettings,
  log: LocalLog,
  localRoutes: readonly Route[],
): Promise<ApiGateway> {
  const { timeoutsMs } = settings;
  const auth = {
    handler: handlers.authorizer,
    functionName: 'authorizer',
    timeoutMs: timeoutsMs.authorizer,
    resultTtlSeconds: settings.authorizerResultTtlSeconds,
  };
  const routes: Route[] = [
    {
      method: 'POST',
      resource: '/payments',
      handler: handlers.paymentsCreate,
      functionName: 'payments-create',
      authorizer: auth,
      timeoutMs: timeoutsMs.paymentsCreate,
    },
    {
      method: 'GET',
      resource: '/payments/{id}',
      handler: handlers.paymentsGet,
      functionName: 'payments-get',
      authorizer: auth,
      timeoutMs: timeoutsMs.paymentsGet,
    },
    // No authorizer: the processor authenticates with its HMAC signature, checked in the handler.
    {
      method: 'POST',
      resource: '/webhooks/processor',
      handler: handlers.webhookReceiver,
      functionName: 'webhook-receiver',
      timeoutMs: timeoutsMs.webhookReceiver,
    },
    openApiRoute(`http://127.0.0.1:${port}`),
    ...localRoutes,
  ];
  return startApiGateway({
    port,
    routes,
    integrationTimeoutMs: settings.integrationTimeoutMs,
    functionTimeoutMs: timeoutsMs.paymentsCreate,
    // The deployed API answers its own errors (401, 504, ...) as problem+json; so does the local one.
    gatewayResponseFormat: 'problem',
    log,
  });
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
