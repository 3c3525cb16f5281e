import { randomUUID } from 'node:crypto';
import {
  type PostgresFaultProxy,
  type RequestMatcher,
  startPostgresFaultProxy,
  type WireRequest,
} from '@keystone-idempotency/local-aws/postgres-fault-proxy';
import { Client } from 'pg';
import { e2eStack } from '../support/e2e-stack';
import { eventually } from '../support/eventually';
import { postgresUrl } from '../support/postgres';

/**
 * The payments service on PostgreSQL, with the database's replies lost or held back on the wire (a TCP proxy that
 * speaks just enough of PostgreSQL's protocol): what a network between a function and RDS Proxy does at random, on
 * demand. The reply to COMMIT is the one that matters most: the payment row and the key's completion either both
 * committed or neither did, and the function cannot tell which. Whatever the fault, the witness (the sandbox
 * processor's ledger) shows one charge, the database one payment row, and the client ends with the 201 a retry
 * replays.
 */
jest.setTimeout(90_000);

const API_KEY = 'sk_test_pg_faults';
const ACCOUNT = 'acct_pg_faults';
const OTHER_API_KEY = 'sk_test_pg_faults_other';
const OTHER_ACCOUNT = 'acct_pg_faults_other';
let proxy: PostgresFaultProxy;

beforeAll(async () => {
  proxy = await startPostgresFaultProxy(postgresUrl());
});
afterAll(() => proxy?.close());

const e2e = e2eStack({
  name: 'pg-faults',
  store: 'postgres',
  apiKeys: { [API_KEY]: ACCOUNT, [OTHER_API_KEY]: OTHER_ACCOUNT },
  // Every statement the functions send goes through the proxy; the test reads the database directly.
  settings: () => ({
    DATABASE_URL: proxy.url,
    IDEMPOTENCY_LEASE_SECONDS: '4',
    API_FUNCTION_TIMEOUT_MS: '3000',
    CONSUMER_FUNCTION_TIMEOUT_MS: '3000',
    PROCESSOR_TIMEOUT_MS: '2000',
    COMPLETER_INTERVAL_SECONDS: '1',
  }),
});

const card = { amount: 3100, currency: 'usd', source: 'tok_visa', description: 'Over a lossy wire' };

function pay(key: string, apiKey = API_KEY) {
  return fetch(`${e2e.url}/payments`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json', 'Idempotency-Key': key },
    body: JSON.stringify(card),
  });
}

/** Retries as a client would (same key) until it gets an answer that is not "later". */
async function payUntilDone(key: string): Promise<Response> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const response = await pay(key);
    if (![409, 502, 503, 504].includes(response.status) || Date.now() > deadline) return response;
    await response.body?.cancel();
    await new Promise((resolve) => setTimeout(resolve, Number(response.headers.get('retry-after') ?? 1) * 1000));
  }
}

const chargesFor = (key: string) =>
  e2e.sandbox.charges().filter((charge) => charge.metadata.operation_key?.endsWith(`|${key}`));

/** The transaction that writes this client key's payment row, and the request in it that `pick` chooses. */
function inPaymentCommit(key: string, pick: (request: WireRequest) => boolean, name: string): RequestMatcher {
  const writesPayment = (request: WireRequest) => /INSERT INTO .*payments/s.test(request.text);
  const ofKey = (request: WireRequest) => request.params.some((param) => param?.includes(key));
  return {
    name: `${name} of the payment commit of ${key}`,
    when: (request) =>
      pick(request) &&
      [...request.transaction, request].some(writesPayment) &&
      [...request.transaction, request].some(ofKey),
  };
}

async function expectOnePaymentBehind(key: string, answer: Response): Promise<void> {
  expect(answer.status).toBe(201);
  const payment = (await answer.json()) as { id: string; charge_id: string };
  const charges = chargesFor(key);
  expect(charges).toHaveLength(1);
  expect(payment.charge_id).toBe(charges[0]!.id);
  const rows = (await e2e.data.payments(ACCOUNT)).filter((row) => row.charge_id === charges[0]!.id);
  expect(rows).toHaveLength(1);
  // And a retry replays exactly that answer.
  const again = await pay(key);
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  expect(await again.json()).toEqual(payment);
}

describe('a payment on PostgreSQL over a lossy wire', () => {
  it("loses COMMIT's reply after the payment and the completion committed: one charge, one row, a replay", async () => {
    const key = randomUUID();
    const lost = proxy.arm({
      match: inPaymentCommit(key, (request) => /^\s*COMMIT\s*$/i.test(request.text), 'COMMIT'),
      fault: { mode: 'drop-reply' },
      count: 1,
    });
    await expectOnePaymentBehind(key, await payUntilDone(key));
    expect(lost.fired()).toBe(1);
  });

  it('loses the reply to the claim after it landed: the store recognises its own claim, one charge', async () => {
    const key = randomUUID();
    const lost = proxy.arm({
      match: {
        name: `the claim of ${key}`,
        when: (request) =>
          /INSERT INTO .*idempotency_keys/s.test(request.text) && request.params.some((p) => p?.includes(key)),
      },
      fault: { mode: 'drop-reply' },
      count: 1,
    });
    await expectOnePaymentBehind(key, await payUntilDone(key));
    expect(lost.fired()).toBe(1);
  });

  it('holds back the commit past the API timeout: the client is told 504, its retries end in one payment', async () => {
    const key = randomUUID();
    const slow = proxy.arm({
      match: inPaymentCommit(key, (request) => /^\s*COMMIT\s*$/i.test(request.text), 'COMMIT'),
      fault: { mode: 'delay-reply', ms: 3500 },
      count: 1,
    });
    const first = await pay(key);
    expect([201, 504]).toContain(first.status);
    await first.body?.cancel();
    await expectOnePaymentBehind(key, await payUntilDone(key));
    expect(slow.fired()).toBe(1);
  });

  it('goes silent in COMMIT: retries answer 409 with Retry-After, another account is served, then one payment', async () => {
    const key = randomUUID();
    // The COMMIT never reaches PostgreSQL, and PostgreSQL is never told the function gave up: its session stays
    // idle in transaction, holding the key's row, as across a partition.
    const silent = proxy.arm({
      match: inPaymentCommit(key, (request) => /^\s*COMMIT\s*$/i.test(request.text), 'COMMIT'),
      fault: { mode: 'stall' },
      count: 1,
    });
    const first = pay(key);
    await eventually(
      () => silent.fired(),
      (fired) => fired === 1,
    );
    // Every retry meanwhile answers at once, in flight, however long the row stays held: past the 4 s lease too,
    // until PostgreSQL ends the silent session (its idle-in-transaction timeout, 5 s), when a retry may take over.
    const retries: { status: number; retryAfter: string | null; ms: number }[] = [];
    const stallEnds = Date.now() + 6_000;
    while (Date.now() < stallEnds) {
      const started = Date.now();
      const retry = await pay(key);
      await retry.body?.cancel();
      if (silent.stalled() === 0) break; // the server ended it meanwhile: this answer is after the stall
      retries.push({ status: retry.status, retryAfter: retry.headers.get('retry-after'), ms: Date.now() - started });
      await new Promise((resolve) => setTimeout(resolve, 400));
    }
    expect(retries.length).toBeGreaterThan(0);
    for (const retry of retries) {
      expect(retry).toMatchObject({ status: 409, retryAfter: expect.stringMatching(/^[1-9][0-9]*$/) });
      expect(retry.ms).toBeLessThan(3_000); // never the gateway's timeout
    }
    // The stall costs its own request only: another account's payment goes through while it lasts.
    const other = await pay(randomUUID(), OTHER_API_KEY);
    expect(other.status).toBe(201);
    await other.body?.cancel();
    expect((await first).status).not.toBe(201);
    // The stall ends (the COMMIT is let through, unless the server ended the session already): one payment.
    silent.release();
    await expectOnePaymentBehind(key, await payUntilDone(key));
  });

  it('survives the database terminating its sessions: the next payment goes through', async () => {
    const before = randomUUID();
    await expectOnePaymentBehind(before, await payUntilDone(before)); // the functions' connections, open
    expect(await terminateSessions(proxy.upstreamPorts())).toBeGreaterThan(0);
    const after = randomUUID();
    await expectOnePaymentBehind(after, await payUntilDone(after));
  });
});

/** Ends, as an administrator or a failover does, the sessions behind these client ports (the proxy's upstream side). */
async function terminateSessions(ports: readonly number[]): Promise<number> {
  const admin = new Client({ connectionString: postgresUrl() });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ ended: boolean }>(
      `SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity
        WHERE client_addr IS NOT NULL AND client_port = ANY($1::int[]) AND pid <> pg_backend_pid()`,
      [[...ports]],
    );
    return rows.filter((row) => row.ended).length;
  } finally {
    await admin.end();
  }
}
