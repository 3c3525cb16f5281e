import { randomBytes } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { ApiKeys, generateApiKey, parseApiKeyList } from '../payments/api-keys';
import { dynamoDbConfig } from '../runtime/clients';
import { numberEnv } from '../runtime/env';
import { startSandbox } from '../sandbox/processor';
import { idempotencyTable, paymentsTable } from '../tables/definitions';
import { ensureTable } from '../tables/ensure';
import { type ApiGateway, type ProxyHandler, type Route, startApiGateway } from './api-gateway';
import { startDynamoDbLocal } from './dynamodb-local';
import { freePort } from './free-port';
import { consoleLog, type LocalLog } from './log';

type Env = Record<string, string | undefined>;

/** Local Lambda timeouts, mirroring the deployed relation: integration < function < lease. */
const API_FUNCTION_TIMEOUT_MS = 10_000;
const INTEGRATION_TIMEOUT_MS = 9_000;

export interface LocalStackOptions {
  /** The environment to read settings from (default `process.env`); handlers see it merged into `process.env`. */
  readonly env?: Env;
  readonly log?: LocalLog;
}

export interface LocalStack {
  readonly apiUrl: string;
  readonly processorUrl: string;
  readonly dynamoDbEndpoint: string;
  /** API keys seeded at start: the ones given in LOCAL_API_KEYS, or two generated demo accounts. */
  readonly apiKeys: readonly { apiKey: string; accountId: string }[];
  readonly tables: { readonly idempotency: string; readonly payments: string };
  stop(): Promise<void>;
}

/**
 * Starts the payments service on this machine, running the same handler code Lambda runs:
 * DynamoDB Local (unless `DYNAMODB_ENDPOINT` names one), the tables from the same definitions the CDK stack uses,
 * the sandbox processor (unless `PROCESSOR_URL` names one), and an emulated API Gateway with the Lambda authorizer.
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
  try {
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

    const port = env.PORT ? Number(env.PORT) : 3000;
    const apiPort = port === 0 ? await freePort() : port;
    if (!env.PROCESSOR_URL) {
      env.PROCESSOR_WEBHOOK_SECRET ||= `whsec_${randomBytes(16).toString('hex')}`;
      const sandbox = await startSandbox({
        port: 0,
        webhookUrl: `http://127.0.0.1:${apiPort}/webhooks/processor`,
        webhookSecret: env.PROCESSOR_WEBHOOK_SECRET,
      });
      stoppers.push(() => sandbox.close());
      env.PROCESSOR_URL = sandbox.url;
    }

    const apiKeys = await seedApiKeys(DynamoDBDocumentClient.from(client), tables.payments, env.LOCAL_API_KEYS);

    // Handlers read their configuration at import (cold start), so the environment is set first.
    Object.assign(process.env, env);
    const api = await startApi(apiPort, env, log);
    stoppers.push(() => api.close());

    return {
      apiUrl: api.url,
      processorUrl: env.PROCESSOR_URL,
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

async function startApi(port: number, env: Env, log: LocalLog): Promise<ApiGateway> {
  const [create, get, authorizer] = await Promise.all([
    import('../../functions/payments-create'),
    import('../../functions/payments-get'),
    import('../../functions/authorizer'),
  ]);
  const timeoutMs = numberEnv('API_FUNCTION_TIMEOUT_MS', API_FUNCTION_TIMEOUT_MS, env);
  const auth = { handler: authorizer.handler, functionName: 'authorizer' };
  const routes: Route[] = [
    { method: 'POST', resource: '/payments', handler: asProxyHandler(create.handler), authorizer: auth, timeoutMs },
    { method: 'GET', resource: '/payments/{id}', handler: asProxyHandler(get.handler), authorizer: auth, timeoutMs },
  ];
  return startApiGateway({
    port,
    routes,
    integrationTimeoutMs: Math.min(INTEGRATION_TIMEOUT_MS, timeoutMs - 500),
    functionTimeoutMs: timeoutMs,
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
