import { randomUUID } from 'node:crypto';
import { GetQueueAttributesCommand, GetQueueUrlCommand } from '@aws-sdk/client-sqs';
import { freePort } from '@keystone-idempotency/local-aws/free-port';
import { type LocalSqs, startLocalSqs } from '@keystone-idempotency/local-aws/sqs';
import { Pool } from 'pg';
import type { StoreKind } from '../../lib/payments/config';
import { type Sandbox, startSandbox } from '../../lib/sandbox/processor';
import { eventually } from './eventually';
import { portTaken, type StackProcess, startStackProcess } from './local-stack-process';
import { postgresUrl } from './postgres';
import { e2eStore, inspectService, type ServiceInspector } from './service-data';

export interface E2eStackOptions {
  /** Begins the names of the stack's tables and queue, which are unique to this fixture. */
  readonly name: string;
  /** The API keys the stack registers (LOCAL_API_KEYS), as `{ apiKey: accountId }`. */
  readonly apiKeys?: Readonly<Record<string, string>>;
  /**
   * Who processes payments: the test's sandbox (the default: the test reads its ledger and arms its faults
   * directly), or the one `npm start` starts for itself (`'stack'`: the test knows it from the banner only).
   */
  readonly processor?: 'test' | 'stack';
  /**
   * The test's sandbox signs each charge's event and sends it to the stack's webhook route, so payments settle
   * through the queue. Off by default: without events, nothing but the client and the completer moves a payment.
   */
  readonly webhooks?: boolean;
  /**
   * Any other variable of the README's "Local settings" (timings, LOCAL_CDK_OUT, DYNAMODB_ENDPOINT...). A function
   * is read when the stack starts, for a value another `beforeAll` produces (a proxy's URL).
   */
  readonly settings?: Readonly<Record<string, string>> | (() => Readonly<Record<string, string>>);
  /**
   * The database the stack runs on. Default: the suite's (`E2E_STORE`, set by jest's `postgres` project), so every
   * end-to-end file runs on both stores. On PostgreSQL the stack gets a schema of its own in the run's server.
   */
  readonly store?: StoreKind;
}

export interface E2eStack {
  /** The running stack process. */
  readonly process: StackProcess;
  /** The REST API's URL; the port stays the same across restarts. */
  readonly url: string;
  /** The HTTP API's URL (the same routes, payload 2.0); the port stays the same across restarts. */
  readonly httpApiUrl: string;
  /** The test's sandbox processor and mailer (not with `processor: 'stack'`). */
  readonly sandbox: Sandbox;
  readonly sqs: LocalSqs;
  /** Every variable the stack was started with. */
  readonly env: Readonly<Record<string, string>>;
  readonly tables: { readonly idempotency: string; readonly payments: string };
  /** The database the stack runs on. */
  readonly store: StoreKind;
  /** Reads what the stack wrote, on its store: its records, and its payment rows. */
  readonly data: ServiceInspector;
  readonly queueName: string;
  /** The webhook signing secret shared by the sandbox and the stack. */
  readonly webhookSecret: string;
  /** The URL of the settlement queue, or of its DLQ (`-dlq`). */
  queueUrl(which?: 'queue' | 'dlq'): Promise<string>;
  /**
   * Resolves once the settlement queue holds no message, visible or in flight: every message sent to it so far has
   * been received and acknowledged (or moved to the DLQ). "Nothing more will happen", without guessing how long
   * the consumer takes.
   */
  queueDrained(): Promise<void>;
  /** Kills the stack process (SIGKILL: no cleanup, as a Lambda container dies), and waits until it is gone. */
  crash(): Promise<void>;
  /** Stops the stack process cleanly (its completer, poller and API with it), as `npm start`'s Ctrl-C does. */
  stop(): Promise<void>;
  /** Starts the stack again, after a crash: same port, same settings, same tables, queue and sandbox. */
  restart(): Promise<void>;
  /**
   * A second stack process with the same settings and state (tables, queue, sandbox) on a port of its own: a new
   * container beside one about to crash, already warm. The test stops it.
   */
  startTwin(): Promise<StackProcess>;
}

/** The two front doors of a stack, for `describe.each`: a case run through each must answer alike. */
export const FRONT_DOORS = [
  ['the REST API', (stack: E2eStack) => stack.url],
  ['the HTTP API', (stack: E2eStack) => stack.httpApiUrl],
] as const;

/**
 * The end-to-end fixture: the local stack process (`bin/local.ts`, what `npm start` runs) with these settings, its
 * own tables and settlement queue, against the run's DynamoDB Local, a sandbox processor (and mailer) and an SQS
 * emulator that belong to the test. Those outlive the stack, so a test can crash it mid-request and start it again
 * on the same port, with the same settings, against the same state.
 *
 * Call it at the top of a file or of a `describe`: it starts everything in `beforeAll` and stops it in `afterAll`
 * (which also clears the sandbox's faults after each test). Its values are readable once `beforeAll` has run.
 *
 * @example
 * const e2e = e2eStack({ name: 'settlement', apiKeys: { sk_test_s: 'acct_s' }, webhooks: true,
 *   settings: { IDEMPOTENCY_LEASE_SECONDS: '2', ... } });
 * it('settles', async () => { await fetch(`${e2e.url}/payments`, ...); e2e.sandbox.charges(); });
 */
export function e2eStack(options: E2eStackOptions): E2eStack {
  let port = 0;
  let httpApiPort = 0;
  let sandbox: Sandbox | undefined;
  let sqs: LocalSqs | undefined;
  let current: StackProcess | undefined;
  /** The first start, kept so that `afterAll` can stop a stack that came up after `beforeAll` timed out. */
  let starting: Promise<StackProcess> | undefined;
  let env: Record<string, string> = {};
  const names = uniqueNames(options.name);
  const webhookSecret = `whsec_${options.name}_${randomUUID().slice(0, 8)}`;
  const ownProcessor = options.processor === 'stack';
  const store = options.store ?? e2eStore();
  let inspector: ServiceInspector | undefined;

  /** The stack's variables, around the test's sandbox and SQS. */
  const stackEnv = (): Record<string, string> => ({
    DYNAMODB_ENDPOINT: process.env.DYNAMODB_ENDPOINT!,
    SQS_ENDPOINT: sqs!.endpoint,
    SETTLEMENT_QUEUE_NAME: names.queue,
    IDEMPOTENCY_TABLE: names.idempotency,
    PAYMENTS_TABLE: names.payments,
    PROCESSOR_WEBHOOK_SECRET: webhookSecret,
    ...(store === 'postgres' ? { STORE: 'postgres', DATABASE_URL: postgresUrl(), DATABASE_SCHEMA: names.schema } : {}),
    ...(ownProcessor ? { PROCESSOR_PORT: '0' } : { PROCESSOR_URL: sandbox!.url }),
    ...(options.apiKeys ? { LOCAL_API_KEYS: apiKeyList(options.apiKeys) } : {}),
    ...(typeof options.settings === 'function' ? options.settings() : options.settings),
  });

  beforeAll(async () => {
    sqs = await startLocalSqs();
    // The REST API's port is chosen here, before the stack runs, since the sandbox's webhooks need it; another
    // process can take it in the second the stack takes to start, so a start that finds it taken is tried again
    // on a new one. The HTTP API picks its own port as it binds, and keeps it across restarts.
    for (let attempt = 1; ; attempt += 1) {
      port = await freePort();
      sandbox = ownProcessor
        ? undefined
        : await startSandbox({
            port: 0,
            ...(options.webhooks ? { webhookUrl: `http://127.0.0.1:${port}/webhooks/processor`, webhookSecret } : {}),
          });
      env = stackEnv();
      starting = startStackProcess(env, port);
      try {
        current = await starting;
        break;
      } catch (error) {
        if (attempt === 3 || !portTaken(error)) throw error;
        await sandbox?.close();
      }
    }
    httpApiPort = Number(new URL(current.httpApiUrl).port);
  });
  afterEach(async () => {
    if (sandbox) await fetch(`${sandbox.url}/__faults`, { method: 'DELETE' });
  });
  afterAll(async () => {
    // A start slower than beforeAll's timeout is still under way: wait for it, or the stack comes up after this hook,
    // runs on, and keeps jest's worker from exiting.
    current ??= await starting?.catch(() => undefined);
    await current?.stop();
    await sandbox?.close();
    await sqs?.close();
    await inspector?.close();
    if (store === 'postgres') await dropSchema(names.schema);
  });

  const required = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`the e2e fixture has no ${what}: read it in a test, after beforeAll`);
    return value;
  };
  async function queueUrl(which: 'queue' | 'dlq' = 'queue'): Promise<string> {
    const name = which === 'dlq' ? `${names.queue}-dlq` : names.queue;
    const { QueueUrl } = await required(sqs, 'SQS').client.send(new GetQueueUrlCommand({ QueueName: name }));
    if (!QueueUrl) throw new Error(`no queue ${name}`);
    return QueueUrl;
  }
  return {
    get process() {
      return required(current, 'stack');
    },
    get url() {
      return required(current, 'stack').url;
    },
    get httpApiUrl() {
      return required(current, 'stack').httpApiUrl;
    },
    get sandbox() {
      return required(sandbox, "sandbox of the test's own (processor: 'test')");
    },
    get sqs() {
      return required(sqs, 'SQS');
    },
    get env() {
      return env;
    },
    tables: { idempotency: names.idempotency, payments: names.payments },
    store,
    get data() {
      inspector ??= inspectService(
        store === 'postgres'
          ? { kind: 'postgres', url: postgresUrl(), schema: names.schema }
          : { kind: 'dynamodb', idempotencyTable: names.idempotency, paymentsTable: names.payments },
      );
      return inspector;
    },
    queueName: names.queue,
    webhookSecret,
    queueUrl,
    async queueDrained() {
      const url = await queueUrl();
      await eventually(
        async () => {
          const { Attributes = {} } = await required(sqs, 'SQS').client.send(
            new GetQueueAttributesCommand({
              QueueUrl: url,
              AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
            }),
          );
          return (
            Number(Attributes.ApproximateNumberOfMessages) + Number(Attributes.ApproximateNumberOfMessagesNotVisible)
          );
        },
        (messages) => messages === 0,
        30_000,
      );
    },
    crash: () => required(current, 'stack').crash(),
    stop: () => required(current, 'stack').stop(),
    async restart() {
      current = await startStackProcess(env, port, httpApiPort);
    },
    startTwin: () => startStackProcess(env),
  };
}

/** Table and queue names no other fixture, file or run shares. */
export function uniqueNames(name: string): { idempotency: string; payments: string; queue: string; schema: string } {
  const suffix = randomUUID().slice(0, 8);
  return {
    idempotency: `${name}-idem-${suffix}`,
    payments: `${name}-pay-${suffix}`,
    queue: `${name}-${suffix}`,
    // Never pg_...: PostgreSQL reserves that prefix.
    schema: `e2e_${name.replace(/[^a-z0-9]+/g, '_')}_${suffix}`,
  };
}

/** Drops a stack's PostgreSQL schema, with everything it created in it. */
async function dropSchema(schema: string): Promise<void> {
  const pool = new Pool({ connectionString: postgresUrl(), max: 1 });
  try {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await pool.end();
  }
}

function apiKeyList(keys: Readonly<Record<string, string>>): string {
  return Object.entries(keys)
    .map(([apiKey, accountId]) => `${apiKey}:${accountId}`)
    .join(',');
}
