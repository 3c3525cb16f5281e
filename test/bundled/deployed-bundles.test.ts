import { randomUUID } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@keystone-idempotency/local-aws/free-port';
import { build } from 'esbuild';
import type { OpenAPIObject } from 'openapi3-ts/oas31';
import { Pool } from 'pg';
import { environments } from '../../lib/infra/environments';
import { serviceFunctions } from '../../lib/infra/functions';
import { BUNDLE_CONDITIONS } from '../../lib/infra/library-source';
import { LAMBDA_BUNDLING } from '../../lib/infra/service-function';
import { THROTTLED_INTEGRATION } from '../../lib/infra/throttling';
import { DeployedStack, referencedLogicalId } from '../../lib/local/cloud-assembly';
import { localName } from '../../lib/local/service-definitions';
import { deployedSettings, LOCAL_CONCURRENCY } from '../../lib/local/stack-settings';
import { type Sandbox, startSandbox } from '../../lib/sandbox/processor';
import { type SynthesizedAssembly, synthesize } from '../support/cdk-synth';
import { e2eStack, uniqueNames } from '../support/e2e-stack';
import { eventually } from '../support/eventually';
import { runStackProcessToExit } from '../support/local-stack-process';
import { OpenApiContract } from '../support/openapi-contract';
import { postgresUrl } from '../support/postgres';
import { descendantEnvironments } from '../support/process-environment';

/**
 * The service end to end on the bytes that deploy. `cdk synth -c env=dev` runs once for this file, as `npm run
 * synth` runs it; the local stack process (`bin/local.ts`, what `npm start` runs) is then pointed at that cloud
 * assembly with LOCAL_CDK_OUT, so every request, queue message and scheduled run goes through the local gateway,
 * the SQS poller and the schedule into the esbuild bundles the template deploys, each function in processes of its
 * own with its own environment from the template (lib/local/bundled-service.ts).
 */
jest.setTimeout(120_000);

const root = join(__dirname, '..', '..');
const dev = environments.dev;
const SECRET = 'whsec_bundled_e2e';
const API_KEY = 'sk_test_bundled';
const ACCOUNT = 'acct_bundled';
const card = { amount: 3100, currency: 'eur', source: 'tok_visa', description: 'Bundled order' };
let assembly: SynthesizedAssembly;

beforeAll(async () => {
  assembly = await synthesize('dev');
}, 300_000);
afterAll(() => assembly?.dispose());

interface Payment {
  id: string;
  status: string;
  charge_id: string;
  settled_at: string | null;
}

/** A local stack's variables for a stack that is expected not to start: its own tables, the test's sandbox. */
function brokenStackEnv(sandbox: Sandbox, extra: Record<string, string> = {}): Record<string, string> {
  const names = uniqueNames('bundled');
  return {
    LOCAL_CDK_OUT: assembly.directory,
    DYNAMODB_ENDPOINT: process.env.DYNAMODB_ENDPOINT!,
    PROCESSOR_URL: sandbox.url,
    PROCESSOR_WEBHOOK_SECRET: SECRET,
    IDEMPOTENCY_TABLE: names.idempotency,
    PAYMENTS_TABLE: names.payments,
    LOCAL_API_KEYS: `${API_KEY}:${ACCOUNT}`,
    ...extra,
  };
}

function pay(url: string, key: string, apiKey = API_KEY, body: unknown = card) {
  return fetch(`${url}/payments`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json', 'Idempotency-Key': key },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

function getPayment(url: string, id: string) {
  return fetch(`${url}/payments/${id}`, { headers: { Authorization: `Bearer ${API_KEY}` } });
}

async function fault(sandbox: Sandbox, body: unknown) {
  const response = await fetch(`${sandbox.url}/__faults`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(response.ok).toBe(true);
}

/** The source files a deployed function's bundle was built from, as its source map names them. */
function mapSources(stack: DeployedStack, id: string): string[] {
  const { codeDirectory } = stack.function(id);
  return (JSON.parse(readFileSync(join(codeDirectory, 'index.mjs.map'), 'utf8')) as { sources: string[] }).sources;
}

describe('the synthesized dev stack', () => {
  it('deploys the functions of the FunctionSpec table, each of which the local stack runs, and the durable one', () => {
    const stack = DeployedStack.load(assembly.directory);
    expect(stack.stackName).toBe(dev.stackName);
    const deployed = [...stack.functions.keys()].sort();
    // The refund approval (a Lambda durable function, lib/infra/approval-workflow.ts) is deployed beside them; the
    // local stack does not run it (its tests run it on AWS's local durable runner).
    expect(deployed).toEqual([...serviceFunctions.map((spec) => spec.id), 'ApprovalWorkflow'].sort());
  });

  it("bundles the AWS SDK's tree-shakable ES builds, not its CommonJS ones, into every function", () => {
    // esbuild drops the `module` condition once another is named (BUNDLE_CONDITIONS says why it is named again).
    const stack = DeployedStack.load(assembly.directory);
    for (const id of stack.functions.keys()) {
      const sdk = mapSources(stack, id).filter((source) => /node_modules\/@(aws-sdk|smithy)\//.test(source));
      expect({ id, sdk: sdk.length > 0 }).toEqual({ id, sdk: true });
      expect({ id, commonJs: sdk.filter((source) => source.includes('/dist-cjs/')) }).toEqual({ id, commonJs: [] });
    }
  });

  it("builds no schema at the payments function's cold start that only the OpenAPI document or orders use", () => {
    // problems.ts and the orders' schema.ts build zod schemas at import: milliseconds of every cold start, for nothing.
    const sources = mapSources(DeployedStack.load(assembly.directory), 'PaymentsCreate');
    expect(sources.some((source) => source.endsWith('lib/payments/schema.ts'))).toBe(true);
    expect(sources.filter((source) => /lib\/(payments\/problems|orders\/schema)\.ts$/.test(source))).toEqual([]);
  });

  it('sets up the local gateway, queue and schedule as the template sets up API Gateway, SQS and EventBridge', () => {
    const { timeouts, idempotency } = dev;
    expect(deployedSettings(DeployedStack.load(assembly.directory))).toEqual({
      leaseSeconds: idempotency.leaseSeconds,
      ttlSeconds: idempotency.ttlSeconds,
      processorTimeoutMs: timeouts.processorMilliseconds,
      warehouseTimeoutMs: timeouts.warehouseMilliseconds,
      mailerTimeoutMs: timeouts.mailerMilliseconds,
      timeoutsMs: {
        PaymentsCreate: timeouts.apiFunctionSeconds * 1000,
        PaymentsGet: timeouts.apiFunctionSeconds * 1000,
        OrdersCreate: (timeouts.longerRouteFunctionSeconds.OrdersCreate ?? 0) * 1000,
        OrdersGet: timeouts.apiFunctionSeconds * 1000,
        InventoryGet: timeouts.apiFunctionSeconds * 1000,
        Authorizer: timeouts.authorizerSeconds * 1000,
        WebhookReceiver: timeouts.apiFunctionSeconds * 1000,
        SettlementConsumer: timeouts.queueConsumerSeconds * 1000,
        PaymentsCompleter: timeouts.completerSeconds * 1000,
      },
      integrationTimeoutMs: timeouts.apiIntegrationSeconds * 1000,
      authorizerResultTtlSeconds: dev.authorizer.cacheSeconds,
      settlement: {
        visibilitySeconds: 6 * timeouts.queueConsumerSeconds,
        maxReceiveCount: 5,
        batchSize: 10,
        concurrency: dev.concurrency.settlementMaxConcurrency,
      },
      completerIntervalSeconds: idempotency.recoveryPeriodMinutes * 60,
      // dev reserves no concurrency; the REST API maps a throttled integration as the local stack answers it.
      concurrency: { unreserved: LOCAL_CONCURRENCY, reserved: {} },
      throttledResponse: THROTTLED_INTEGRATION,
    });
  });
});

/** What every environment has besides its template's variables: the Lambda service's, and the local endpoints. */
const ADDED = new Set([
  '_HANDLER',
  'AWS_REGION',
  'AWS_DEFAULT_REGION',
  'AWS_EXECUTION_ENV',
  'AWS_LAMBDA_FUNCTION_NAME',
  'AWS_LAMBDA_FUNCTION_VERSION',
  'AWS_LAMBDA_FUNCTION_MEMORY_SIZE',
  'AWS_LAMBDA_INITIALIZATION_TYPE',
  'AWS_LAMBDA_LOG_GROUP_NAME',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'LAMBDA_TASK_ROOT',
  'PATH',
  'LANG',
  'TZ',
  'AWS_SAM_LOCAL',
  'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED',
  'DYNAMODB_ENDPOINT',
  'SQS_ENDPOINT',
  // Node's IPC channel to the stack: in the process's initial environment, removed from process.env as it starts.
  'NODE_CHANNEL_FD',
  'NODE_CHANNEL_SERIALIZATION_MODE',
]);

function pick(env: Readonly<Record<string, string>>, names: readonly string[]): Record<string, string | undefined> {
  return Object.fromEntries(names.map((name) => [name, env[name]]));
}

describe("the service run from its bundles, with the template's own values", () => {
  const bundled = e2eStack({
    name: 'bundled',
    apiKeys: { [API_KEY]: ACCOUNT },
    webhooks: true,
    settings: () => ({
      LOCAL_CDK_OUT: assembly.directory,
      // Only the stack process has this: no function may see it.
      KEYSTONE_STACK_ONLY: 'the stack process, not its functions',
    }),
  });
  let contract: OpenApiContract;

  beforeAll(async () => {
    contract = new OpenApiContract((await (await fetch(`${bundled.url}/openapi.json`)).json()) as OpenAPIObject);
  });

  it('says which bundle each function runs, and that nothing but the stand-ins differs from the template', () => {
    const output = bundled.process.output();
    expect(output).toContain(`functions from the bundles of ${dev.stackName} in ${assembly.directory}`);
    for (const { id } of serviceFunctions) {
      expect(output).toMatch(new RegExp(`${id}: asset\\.[0-9a-f]{64} \\(index\\.handler\\)`));
    }
    expect(output).not.toContain('overridden');
  });

  it('takes a payment through the authorizer, replays it with one charge, and reads it back', async () => {
    const key = randomUUID();
    const first = await pay(bundled.url, key);
    await contract.check('POST /payments', first);
    expect(first.status).toBe(201);
    const payment = (await first.json()) as Payment;

    const replay = await pay(bundled.url, key);
    await contract.check('POST /payments', replay);
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(((await replay.json()) as Payment).id).toBe(payment.id);
    expect(bundled.sandbox.charges().filter((charge) => charge.metadata.payment_id === payment.id)).toHaveLength(1);

    const read = await getPayment(bundled.url, payment.id);
    await contract.check('GET /payments/{id}', read);
    expect(read.status).toBe(200);
    expect(((await read.json()) as Payment).charge_id).toBe(payment.charge_id);
  });

  it('turns away an unknown API key and a bad body before anything is charged', async () => {
    const charges = bundled.sandbox.charges().length;
    const unknown = await pay(bundled.url, randomUUID(), 'sk_test_nobody');
    await contract.check('POST /payments', unknown);
    expect(unknown.status).toBe(401);
    const invalid = await pay(bundled.url, randomUUID(), API_KEY, { ...card, amount: -1 });
    await contract.check('POST /payments', invalid);
    expect(invalid.status).toBe(400);
    expect(invalid.headers.get('content-type')).toBe('application/problem+json');
    expect(bundled.sandbox.charges()).toHaveLength(charges);
  });

  it('runs the same bundles behind the HTTP API: the authorizer answers its REQUEST event, the payment replays', async () => {
    const key = randomUUID();
    const first = await pay(bundled.httpApiUrl, key);
    await contract.check('POST /payments', first);
    expect(first.status).toBe(201);
    const throughRest = await pay(bundled.url, key);
    expect(throughRest.headers.get('idempotent-replayed')).toBe('true');
    expect(await throughRest.text()).toBe(await first.text());
    const unknown = await pay(bundled.httpApiUrl, randomUUID(), 'sk_test_nobody');
    expect(unknown.status).toBe(403);
    expect(await unknown.json()).toEqual({ message: 'Forbidden' });
  });

  it("settles the payment from the processor's signed event, through the queue, with one receipt", async () => {
    const response = await pay(bundled.url, randomUUID());
    expect(response.status).toBe(201);
    const payment = (await response.json()) as Payment;
    const settled = await eventually(
      async () => (await (await getPayment(bundled.url, payment.id)).json()) as Payment,
      (p) => p.status === 'settled',
    );
    expect(settled.settled_at).toEqual(expect.any(String));
    const receipts = () =>
      bundled.sandbox.emails().filter((email) => (email.metadata as Record<string, string>)?.payment_id === payment.id);
    await eventually(receipts, (emails) => emails.length === 1);
  });

  it("records a payment whose client never came back, from the processor's event", async () => {
    await fault(bundled.sandbox, { mode: 'drop_after_charge', count: 1 });
    const key = randomUUID();
    const lost = await pay(bundled.url, key);
    expect(lost.status).toBe(502);
    const charge = bundled.sandbox.charges().find((c) => c.metadata.operation_key?.endsWith(`|${key}`));
    expect(charge).toBeDefined();
    const recorded = await eventually(
      () => getPayment(bundled.url, charge!.metadata.payment_id!),
      (response) => response.status === 200,
    );
    expect(((await recorded.json()) as Payment).charge_id).toBe(charge!.id);
  });

  it("runs each function in processes of its own, with its template's variables and only those", async () => {
    const deployed = DeployedStack.load(assembly.directory);
    /** What the test itself gave the stack, for each variable the template can only name. */
    const local: Record<string, string> = {
      IDEMPOTENCY_TABLE: bundled.tables.idempotency,
      PAYMENTS_TABLE: bundled.tables.payments,
      SETTLEMENT_QUEUE_URL: await bundled.queueUrl(),
      SETTLEMENT_DLQ_URL: await bundled.queueUrl('dlq'),
      PROCESSOR_URL: bundled.sandbox.url,
      MAILER_URL: bundled.sandbox.url,
      WAREHOUSE_URL: bundled.sandbox.url,
    };
    const processes = descendantEnvironments(bundled.process.pid).filter(({ env }) => env.AWS_LAMBDA_FUNCTION_NAME);
    for (const spec of serviceFunctions) {
      const name = localName(spec);
      const own = processes.filter(({ env }) => env.AWS_LAMBDA_FUNCTION_NAME === name);
      expect({ name, environments: own.length > 0 }).toEqual({ name, environments: true });
      const template = deployed.function(spec.id).environment;
      for (const { env } of own) {
        const expected: Record<string, string> = {};
        for (const [variable, value] of Object.entries(template)) {
          if (variable === 'PROCESSOR_WEBHOOK_SECRET_ARN') expected.PROCESSOR_WEBHOOK_SECRET = bundled.webhookSecret;
          else if (referencedLogicalId(value) || variable.endsWith('_URL')) expected[variable] = local[variable]!;
          else expected[variable] = String(value);
        }
        // The template's values, the local stand-ins, and nothing the template does not set for this function...
        expect(pick(env, Object.keys(expected))).toEqual(expected);
        const unexpected = Object.keys(env).filter((variable) => !(variable in expected) && !ADDED.has(variable));
        expect({ name, unexpected }).toEqual({ name, unexpected: [] });
        // ...and none of what the stack process itself was started with.
        expect(env.KEYSTONE_STACK_ONLY).toBeUndefined();
      }
    }
    const getEnv = processes.find(({ env }) => env.AWS_LAMBDA_FUNCTION_NAME === 'payments-get')!.env;
    expect(getEnv).not.toHaveProperty('PROCESSOR_URL');
    expect(getEnv).not.toHaveProperty('IDEMPOTENCY_TABLE');
    expect(getEnv).not.toHaveProperty('SQS_ENDPOINT');
    expect(getEnv).toMatchObject({
      IDEMPOTENCY_LEASE_SECONDS: '90',
      LOG_LEVEL: 'DEBUG',
      NODE_OPTIONS: '--enable-source-maps',
    });
  });
});

describe('the service run from its bundles, with a 4 s lease so that recovery fits in a test', () => {
  // No webhooks: only the completer can find a payment whose client never came back.
  const bundled = e2eStack({
    name: 'bundled-lease',
    apiKeys: { [API_KEY]: ACCOUNT },
    settings: () => ({
      LOCAL_CDK_OUT: assembly.directory,
      // The template's 90 s lease, 12 s to 60 s timeouts and 1-minute schedule, scaled down in the same relation.
      IDEMPOTENCY_LEASE_SECONDS: '4',
      API_FUNCTION_TIMEOUT_MS: '3000',
      CONSUMER_FUNCTION_TIMEOUT_MS: '3000',
      PROCESSOR_TIMEOUT_MS: '2000',
      COMPLETER_INTERVAL_SECONDS: '1',
    }),
  });

  it('says what it overrode', () => {
    expect(bundled.process.output()).toContain(
      'overridden: IDEMPOTENCY_LEASE_SECONDS: 90 -> 4, PROCESSOR_TIMEOUT_MS: 8000 -> 2000',
    );
  });

  it('finishes a payment whose client never came back and whose event never came, with the completer', async () => {
    await fault(bundled.sandbox, { mode: 'drop_after_charge', count: 1 });
    const key = randomUUID();
    const lost = await pay(bundled.url, key);
    expect(lost.status).toBe(502);
    const charge = bundled.sandbox.charges().find((c) => c.metadata.operation_key?.endsWith(`|${key}`))!;
    expect(charge).toBeDefined();
    // Due a lease after the release, then found within a period: well within 20 s.
    const recorded = await eventually(
      () => getPayment(bundled.url, charge.metadata.payment_id!),
      (response) => response.status === 200,
    );
    const payment = (await recorded.json()) as Payment;
    expect(payment.charge_id).toBe(charge.id);
    // The client's late retry replays the 201 the completer stored, and charges nothing.
    const retry = await pay(bundled.url, key);
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(((await retry.json()) as Payment).id).toBe(payment.id);
    expect(bundled.sandbox.charges().filter((c) => c.metadata.operation_key?.endsWith(`|${key}`))).toHaveLength(1);
  });
});

describe('a broken bundle stops the bundled run at start, naming the function and the cause', () => {
  let sandbox: Sandbox;
  const copies: string[] = [];

  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0 });
  });
  afterAll(async () => {
    await sandbox?.close();
    for (const copy of copies) rmSync(copy, { recursive: true, force: true });
  });

  /** A copy of the synthesized assembly, and the directory of one function's bundle in it. */
  function copyOfAssembly(): { directory: string; bundleOf(id: string): string; templateFile: string } {
    const directory = mkdtempSync(join(tmpdir(), 'keystone-cdk-out-broken-'));
    copies.push(directory);
    cpSync(assembly.directory, directory, { recursive: true });
    const stack = DeployedStack.load(directory);
    return {
      directory,
      bundleOf: (id) => stack.function(id).codeDirectory,
      templateFile: join(directory, `${stack.stackName}.template.json`),
    };
  }

  /** Bundles a function again as CDK does (LAMBDA_BUNDLING), with one thing changed, over its asset. */
  async function rebundle(entry: string, outdir: string, change: { external: string[] }) {
    rmSync(outdir, { recursive: true, force: true });
    await build({
      entryPoints: [join(root, entry)],
      outfile: join(outdir, 'index.mjs'),
      bundle: true,
      conditions: [...BUNDLE_CONDITIONS],
      platform: 'node',
      target: 'node22',
      format: 'esm',
      mainFields: LAMBDA_BUNDLING.mainFields,
      banner: { js: LAMBDA_BUNDLING.banner! },
      define: LAMBDA_BUNDLING.define,
      external: change.external,
      minify: true,
      logLevel: 'silent',
    });
  }

  async function runBroken(directory: string) {
    const { code, output } = await runStackProcessToExit(
      brokenStackEnv(sandbox, { LOCAL_CDK_OUT: directory, PORT: String(await freePort()) }),
      60_000,
    );
    return { code, output };
  }

  it('when the handler export was renamed', async () => {
    const copy = copyOfAssembly();
    const file = join(copy.bundleOf('PaymentsGet'), 'index.mjs');
    const source = readFileSync(file, 'utf8');
    const renamed = source.replace(/export\{([\w$]+) as handler\}/, 'export{$1 as getPayment}');
    expect(renamed).not.toBe(source);
    writeFileSync(file, renamed);

    const { code, output } = await runBroken(copy.directory);
    expect(code).toBe(1);
    expect(output).toContain('The bundled functions failed to initialise:');
    expect(output).toMatch(
      /- PaymentsGet from asset\.[0-9a-f]{64} \(index\.handler\): Runtime\.HandlerNotFound: index\.handler is undefined or not exported/,
    );
    expect(output).not.toContain('API listening on');
  });

  it('when the bundle imports a package it does not carry (marked external)', async () => {
    const copy = copyOfAssembly();
    await rebundle('functions/payments-get.ts', copy.bundleOf('PaymentsGet'), { external: ['@middy/core'] });

    const { code, output } = await runBroken(copy.directory);
    expect(code).toBe(1);
    expect(output).toMatch(
      /- PaymentsGet from asset\.[0-9a-f]{64} \(index\.handler\): Runtime\.ImportModuleError: Error: Cannot find package '@middy\/core'/,
    );
  });

  it('when the template no longer gives a function a variable it reads at cold start', async () => {
    const copy = copyOfAssembly();
    const template = JSON.parse(readFileSync(copy.templateFile, 'utf8'));
    const [logicalId] = Object.entries(
      template.Resources as Record<string, { Metadata?: Record<string, string> }>,
    ).find(([, resource]) => resource.Metadata?.['aws:cdk:path'] === `${dev.stackName}/PaymentsGet/Function/Resource`)!;
    const variables = template.Resources[logicalId].Properties.Environment.Variables;
    expect(variables.PAYMENTS_TABLE).toBeDefined();
    delete variables.PAYMENTS_TABLE;
    writeFileSync(copy.templateFile, JSON.stringify(template));

    const { code, output } = await runBroken(copy.directory);
    expect(code).toBe(1);
    // The local stack knows the payments table, and still does not hand it to a function whose template lacks it.
    expect(output).toMatch(
      /- PaymentsGet from asset\.[0-9a-f]{64} \(index\.handler\): ConfigurationError: environment variable PAYMENTS_TABLE is required/,
    );
  });
});

describe('the service on PostgreSQL, from the bundles of `cdk synth -c env=dev -c store=postgres`', () => {
  const schema = `bundled_${randomUUID().replaceAll('-', '').slice(0, 8)}`;
  let postgresAssembly: SynthesizedAssembly;
  let admin: Pool;
  // Before the stack's own beforeAll (hooks run in the order they are declared): it reads the assembly.
  beforeAll(async () => {
    postgresAssembly = await synthesize('dev', { context: { store: 'postgres' } });
    admin = new Pool({ connectionString: postgresUrl(), max: 1 });
  }, 300_000);
  afterAll(async () => {
    postgresAssembly?.dispose();
    if (!admin) return;
    // The functions' roles belong to the server the whole run shares: this file's go with it.
    const { rows } = await admin.query<{ rolname: string }>(
      "SELECT rolname FROM pg_roles WHERE rolname LIKE 'keystone\\_%'",
    );
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    for (const { rolname } of rows) {
      await admin.query(`DROP OWNED BY "${rolname}"`);
      await admin.query(`DROP ROLE "${rolname}"`);
    }
    await admin.end();
  });
  const bundled = e2eStack({
    name: 'bundled-postgres',
    apiKeys: { [API_KEY]: ACCOUNT },
    webhooks: true,
    settings: () => ({
      LOCAL_CDK_OUT: postgresAssembly.directory,
      DATABASE_URL: postgresUrl(),
      // This file's own schema, in place of the template's `keystone`.
      DATABASE_SCHEMA: schema,
      // The completer every second: its recovery query and its purge run many times during the test.
      COMPLETER_INTERVAL_SECONDS: '1',
    }),
  });

  const bundleSources = (id: string) => mapSources(DeployedStack.load(postgresAssembly.directory), id);

  it('synthesizes without a warning', () => {
    expect(postgresAssembly.output).not.toMatch(/warn/i);
    expect(DeployedStack.load(postgresAssembly.directory).store()).toBe('postgres');
  });

  it('bundles pg and the RDS signer into each function, and no DynamoDB client', () => {
    for (const { id } of serviceFunctions) {
      const sources = bundleSources(id);
      expect({ id, pg: sources.some((source) => source.includes('node_modules/pg/')) }).toEqual({ id, pg: true });
      expect({ id, signer: sources.some((source) => source.includes('@aws-sdk/rds-signer')) }).toEqual({
        id,
        signer: true,
      });
      expect(sources.filter((source) => /client-dynamodb|lib-dynamodb|src\/dynamodb\//.test(source))).toEqual([]);
    }
  });

  it('connects each function as its own database user, in place of the proxy and its IAM token', () => {
    const processes = descendantEnvironments(bundled.process.pid).filter(({ env }) => env.AWS_LAMBDA_FUNCTION_NAME);
    for (const spec of serviceFunctions) {
      const own = processes.filter(({ env }) => env.AWS_LAMBDA_FUNCTION_NAME === localName(spec));
      expect(own.length).toBeGreaterThan(0);
      for (const { env } of own) {
        expect(new URL(env.DATABASE_URL!).username).toBe(env.DATABASE_USER);
        expect(env.DATABASE_USER).toMatch(/^keystone_[a-z_]+$/);
        expect(env.DATABASE_SCHEMA).toBe(schema);
        expect(env.STORE).toBe('postgres');
        expect(env.DATABASE_HOST).toBeUndefined();
        expect(env.IDEMPOTENCY_TABLE).toBeUndefined();
      }
    }
    expect(bundled.process.output()).toContain(`overridden: `);
    expect(bundled.process.output()).toContain(`DATABASE_SCHEMA: keystone -> ${schema}`);
  });

  it('takes a payment, replays it with one charge, reads it back and settles it, all in PostgreSQL', async () => {
    const key = randomUUID();
    const first = await pay(bundled.url, key);
    expect(first.status).toBe(201);
    const payment = (await first.json()) as Payment;
    const replay = await pay(bundled.url, key);
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(((await replay.json()) as Payment).id).toBe(payment.id);
    expect(bundled.sandbox.charges().filter((charge) => charge.metadata.payment_id === payment.id)).toHaveLength(1);

    const settled = await eventually(
      async () => (await (await getPayment(bundled.url, payment.id)).json()) as Payment,
      (p) => p.status === 'settled',
    );
    expect(settled.charge_id).toBe(payment.charge_id);
    const { rows } = await admin.query<{ status: string }>(
      `SELECT status FROM "${schema}".payments WHERE account_id = $1 AND id = $2`,
      [ACCOUNT, payment.id],
    );
    expect(rows).toEqual([{ status: 'settled' }]);
    const receipts = () =>
      bundled.sandbox.emails().filter((email) => (email.metadata as Record<string, string>)?.payment_id === payment.id);
    await eventually(receipts, (emails) => emails.length === 1);
  });

  it('turns away an unknown API key, with nothing charged', async () => {
    const charges = bundled.sandbox.charges().length;
    expect((await pay(bundled.url, randomUUID(), 'sk_test_nobody')).status).toBe(401);
    expect(bundled.sandbox.charges()).toHaveLength(charges);
  });

  it('runs every function within its privileges: no statement was refused', async () => {
    // The completer has run every second since the start, its recovery query and its purge included.
    await eventually(
      async () => (await admin.query(`SELECT 1 FROM "${schema}".idempotency_keys`)).rowCount ?? 0,
      (rows) => rows > 0,
    );
    expect(bundled.process.output()).not.toMatch(/permission denied/i);
  });
});
