import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { freePort } from '@keystone-idempotency/local-aws/free-port';
import { IDEMPOTENCY_DISABLED_ENV } from 'keystone-idempotency/engine';
import { Pool } from 'pg';
import { STACK_POOL_NAME } from '../../lib/local/stack';
import { localClient } from '../support/dynamodb';
import { eventually } from '../support/eventually';
import { runStackProcessToExit, type StackProcess, startStackProcess } from '../support/local-stack-process';
import { postgresUrl } from '../support/postgres';

/**
 * `npm start` as a newcomer meets it: the ports it is told to use, and what it says when it can't. The stack runs
 * as `bin/local.ts` in a child process against the run's DynamoDB Local; its table names are unique per test, so
 * whether it created them is the witness for "it started things before failing".
 */
jest.setTimeout(120_000);

const db = localClient();
afterAll(() => db.destroy());

function uniqueTables() {
  return {
    IDEMPOTENCY_TABLE: `start-idem-${randomUUID().slice(0, 8)}`,
    PAYMENTS_TABLE: `start-pay-${randomUUID().slice(0, 8)}`,
  };
}

async function tableNames(): Promise<string[]> {
  const names: string[] = [];
  let start: string | undefined;
  do {
    const page = await db.send(new ListTablesCommand({ ExclusiveStartTableName: start }));
    names.push(...(page.TableNames ?? []));
    start = page.LastEvaluatedTableName;
  } while (start);
  return names;
}

async function holdPort(): Promise<{ port: number; release: () => Promise<void> }> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { port, release: () => new Promise((resolve) => server.close(() => resolve())) };
}

const PORT_VARIABLES = ['PORT', 'HTTP_API_PORT', 'PROCESSOR_PORT'];

describe('npm start with a port that is taken', () => {
  it.each(PORT_VARIABLES)('fails at once naming %s, before it creates anything', async (variable) => {
    const held = await holdPort();
    try {
      const tables = uniqueTables();
      const others = Object.fromEntries(
        PORT_VARIABLES.filter((other) => other !== variable).map((other) => [other, '0']),
      );
      const { code, output } = await runStackProcessToExit({
        DYNAMODB_ENDPOINT: process.env.DYNAMODB_ENDPOINT!,
        ...tables,
        ...others,
        [variable]: String(held.port),
      });
      expect(code).toBe(1);
      expect(output).toContain(`${variable}: port ${held.port} on 127.0.0.1 is already in use`);
      const existing = await tableNames();
      expect(existing).not.toContain(tables.IDEMPOTENCY_TABLE);
      expect(existing).not.toContain(tables.PAYMENTS_TABLE);
    } finally {
      await held.release();
    }
  });
});

describe('npm start with PROCESSOR_PORT and HTTP_API_PORT', () => {
  let stack: StackProcess;
  let starting: Promise<StackProcess> | undefined;
  let processorPort: number;
  let httpApiPort: number;
  beforeAll(async () => {
    [processorPort, httpApiPort] = await Promise.all([freePort(), freePort()]);
    starting = startStackProcess(
      {
        DYNAMODB_ENDPOINT: process.env.DYNAMODB_ENDPOINT!,
        ...uniqueTables(),
        PROCESSOR_PORT: String(processorPort),
        LOCAL_API_KEYS: 'sk_test_start:acct_start',
      },
      undefined,
      httpApiPort,
    );
    stack = await starting;
  });
  // Awaited, not read from `stack`: a start slower than beforeAll's timeout would otherwise come up after this hook.
  afterAll(() =>
    starting?.then(
      (started) => started.stop(),
      () => undefined,
    ),
  );

  it('runs its own sandbox processor on that port', async () => {
    expect(stack.output()).toContain(`export PROCESSOR=http://127.0.0.1:${processorPort}`);
    const charges = await fetch(`http://127.0.0.1:${processorPort}/charges`);
    expect(charges.status).toBe(200);
    expect(await charges.json()).toEqual([]);
  });

  it('serves the API as an HTTP API on that port too, and prints its URL on a line starting `http api`', async () => {
    const url = `http://127.0.0.1:${httpApiPort}`;
    expect(stack.output()).toMatch(new RegExp(`^ {2}http api +${url.replaceAll('.', '\\.')} `, 'm'));
    expect(stack.output()).toContain(`export HTTP_API=${url}`);
    expect(stack.httpApiUrl).toBe(url);
    // The HTTP API's authorizer: no key is its 401, a key it does not know its 403 (the REST API says 401).
    const noKey = await fetch(`${url}/payments/pay_1`);
    const unknownKey = await fetch(`${url}/payments/pay_1`, { headers: { Authorization: 'Bearer sk_test_nobody' } });
    const known = await fetch(`${url}/payments/pay_${'0'.repeat(24)}`, {
      headers: { Authorization: 'Bearer sk_test_start' },
    });
    expect([noKey.status, unknownKey.status, known.status]).toEqual([401, 403, 404]);
    expect(await unknownKey.json()).toEqual({ message: 'Forbidden' });
    expect(known.headers.get('content-type')).toBe('application/problem+json');
  });
});

describe(`npm start with ${IDEMPOTENCY_DISABLED_ENV} exported`, () => {
  it.each(['true', '1'])('refuses to start with %s, naming the variable, before it creates anything', async (value) => {
    const tables = uniqueTables();
    const { code, output } = await runStackProcessToExit({
      DYNAMODB_ENDPOINT: process.env.DYNAMODB_ENDPOINT!,
      ...tables,
      PORT: '0',
      [IDEMPOTENCY_DISABLED_ENV]: value,
    });
    expect(code).toBe(1);
    expect(output).toContain(
      `${IDEMPOTENCY_DISABLED_ENV}=${value} is set: it turns idempotency off, for unit tests only`,
    );
    expect(output).toContain(`unset ${IDEMPOTENCY_DISABLED_ENV}`);
    const existing = await tableNames();
    expect(existing).not.toContain(tables.IDEMPOTENCY_TABLE);
    expect(existing).not.toContain(tables.PAYMENTS_TABLE);
  });
});

describe('STORE=postgres npm start when the database ends its sessions', () => {
  // A database of this test's own on the run's server, so the sessions it ends are this stack's only.
  const database = `start_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const admin = new Pool({ connectionString: postgresUrl(), max: 1 });
  let stack: StackProcess | undefined;
  let starting: Promise<StackProcess> | undefined;
  beforeAll(() => admin.query(`CREATE DATABASE ${database}`));
  afterAll(async () => {
    // Stopped once it is up, even when the test failed while it was still starting: a stack that came up after
    // this hook would run on, and keep jest's worker from exiting.
    await starting?.then(
      (started) => started.stop(),
      () => undefined,
    );
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  });

  it('keeps serving: a payment goes through after its own connections were terminated', async () => {
    const url = new URL(postgresUrl());
    url.pathname = `/${database}`;
    starting = startStackProcess({
      STORE: 'postgres',
      DATABASE_URL: url.toString(),
      PROCESSOR_PORT: '0',
      LOCAL_API_KEYS: 'sk_test_sessions:acct_sessions',
    });
    const starts = starting.then(
      (started) => {
        stack = started; // stopped by afterAll, whatever fails below
        return 'started';
      },
      (error: Error) => error.message,
    );
    // The stack's own pool (the migration, the API keys it seeds) keeps its connections idle for a while once the
    // keys are in: the moment a server restart, a failover or an operator's pg_terminate_backend ends them.
    const target = new Pool({ connectionString: url.toString(), max: 1 });
    try {
      await eventually(
        async () => {
          const seeded = await target.query<{ count: string }>('SELECT count(*) FROM api_keys').then(
            ({ rows }) => Number(rows[0]?.count),
            () => 0,
          );
          // The seeded account and the demo page's.
          return seeded >= 2;
        },
        Boolean,
        60_000,
      );
    } finally {
      await target.end();
    }
    const { rows } = await admin.query<{ terminated: boolean }>(
      `SELECT pg_terminate_backend(pid) AS terminated FROM pg_stat_activity
        WHERE datname = $1 AND application_name = $2`,
      [database, STACK_POOL_NAME],
    );
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((row) => row.terminated)).toBe(true);
    expect(await starts).toBe('started');
    await eventually(() => stack!.output().includes('a PostgreSQL connection of the local stack was closed'));

    const response = await fetch(`${stack!.url}/payments`, {
      method: 'POST',
      headers: {
        Authorization: 'Bearer sk_test_sessions',
        'Content-Type': 'application/json',
        'Idempotency-Key': randomUUID(),
      },
      body: JSON.stringify({ amount: 1000, currency: 'eur', source: 'tok_visa' }),
    });
    expect(response.status).toBe(201);
  });
});
