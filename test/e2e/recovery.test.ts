import { randomUUID } from 'node:crypto';
import { GetQueueUrlCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { scopedKey } from '../../lib/engine/key';
import { RecordStatus } from '../../lib/engine/record';
import { freePort } from '../../lib/local/free-port';
import { type LocalSqs, startLocalSqs } from '../../lib/local/sqs';
import type { Charge } from '../../lib/sandbox/charges';
import { type Sandbox, startSandbox } from '../../lib/sandbox/processor';
import { signPayload } from '../../lib/webhooks/signature';
import { localDocumentClient } from '../support/dynamodb';
import { type StackProcess, startStackProcess } from '../support/local-stack-process';

/**
 * Payments whose client never comes back, end to end over HTTP. The witness is the sandbox processor's ledger:
 * every charge made under one of our keys must end as exactly one payment (and the operation's stored 201), within
 * the bound, and a late retry replays that 201. The sandbox, SQS and DynamoDB belong to the test, so they outlive a
 * killed API process.
 *
 * Timings (the shared rules hold): processor 1.5 s < functions 2 s, functions + 1 s margin <= lease 3 s <= visibility
 * 4 s; completer every 1 s; TTL 60 s. The bound for a payment to appear: twice the lease after the last attempt ended (6 s), plus the
 * event's delivery.
 */
jest.setTimeout(120_000);

const LEASE_MS = 3000;
const BOUND_MS = 2 * LEASE_MS + 1500;
const SECRET = 'whsec_e2e_recovery';
const API_KEY = 'sk_test_recovery';
const ACCOUNT = 'acct_recovery';
let sandbox: Sandbox;
let sqs: LocalSqs;
let port: number;
let stack: StackProcess;
let env: Record<string, string>;
const db = localDocumentClient();

beforeAll(async () => {
  port = await freePort();
  sqs = await startLocalSqs();
  sandbox = await startSandbox({
    port: 0,
    webhookUrl: `http://127.0.0.1:${port}/webhooks/processor`,
    webhookSecret: SECRET,
  });
  env = {
    DYNAMODB_ENDPOINT: process.env.DYNAMODB_ENDPOINT!,
    PROCESSOR_URL: sandbox.url,
    SQS_ENDPOINT: sqs.endpoint,
    SETTLEMENT_QUEUE_NAME: `recovery-${randomUUID().slice(0, 8)}`,
    PROCESSOR_WEBHOOK_SECRET: SECRET,
    IDEMPOTENCY_TABLE: `e2e-idem-${randomUUID().slice(0, 8)}`,
    PAYMENTS_TABLE: `e2e-pay-${randomUUID().slice(0, 8)}`,
    LOCAL_API_KEYS: `${API_KEY}:${ACCOUNT}`,
    IDEMPOTENCY_LEASE_SECONDS: String(LEASE_MS / 1000),
    IDEMPOTENCY_TTL_SECONDS: '60',
    API_FUNCTION_TIMEOUT_MS: '2000',
    CONSUMER_FUNCTION_TIMEOUT_MS: '2000',
    PROCESSOR_TIMEOUT_MS: '1500',
    MAILER_TIMEOUT_MS: '1000',
    SETTLEMENT_VISIBILITY_SECONDS: '4',
    SETTLEMENT_MAX_RECEIVE_COUNT: '5',
    COMPLETER_INTERVAL_SECONDS: '1',
  };
  stack = await startStackProcess(env, port);
});
afterAll(async () => {
  await stack?.stop();
  await sandbox?.close();
  await sqs?.close();
  db.destroy();
});
afterEach(async () => {
  await sandboxCall('DELETE', '/__faults');
  await sandboxCall('PUT', '/__webhooks', { enabled: true });
});

interface Payment {
  id: string;
  status: string;
  charge_id: string;
  amount: number;
  settled_at: string | null;
}

const card = { amount: 2500, currency: 'usd', source: 'tok_visa', description: 'Order 7' };

function pay(key: string, url = stack.url) {
  return fetch(`${url}/payments`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${API_KEY}`, 'Content-Type': 'application/json', 'Idempotency-Key': key },
    body: JSON.stringify(card),
  });
}

async function sandboxCall(method: string, path: string, body?: unknown): Promise<void> {
  const response = await fetch(`${sandbox.url}${path}`, {
    method,
    headers: { 'Content-Type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}`);
}

/** Charges the processor made for one client key: the witness for "money moved for this operation". */
function chargesFor(clientKey: string): Charge[] {
  return sandbox.charges().filter((charge) => charge.metadata.operation_key?.endsWith(`|${clientKey}`));
}

async function paymentFor(id: string): Promise<Payment | undefined> {
  const response = await fetch(`${stack.url}/payments/${id}`, { headers: { Authorization: `Bearer ${API_KEY}` } });
  return response.status === 200 ? ((await response.json()) as Payment) : undefined;
}

async function eventually<T>(probe: () => Promise<T> | T, done: (value: T) => boolean, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms; last: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The one charge for a client key, and its payment once it is recorded (within `timeoutMs`). */
async function paymentAppears(clientKey: string, timeoutMs = BOUND_MS): Promise<{ charge: Charge; payment: Payment }> {
  const [charge] = await eventually(
    () => chargesFor(clientKey),
    (charges) => charges.length === 1,
    timeoutMs,
  );
  const payment = await eventually(
    () => paymentFor(charge!.metadata.payment_id!),
    (found) => found !== undefined,
    timeoutMs,
  );
  expect(payment!.charge_id).toBe(charge!.id);
  return { charge: charge!, payment: payment! };
}

/** The client comes back late: the same request replays the 201 recovery stored, and nothing is charged again. */
async function expectLateRetryReplays(clientKey: string, charge: Charge) {
  const late = await pay(clientKey);
  expect(late.status).toBe(201);
  expect(late.headers.get('idempotent-replayed')).toBe('true');
  expect(late.headers.get('location')).toBe(`/payments/${charge.metadata.payment_id}`);
  expect(await late.json()).toEqual({
    id: charge.metadata.payment_id,
    amount: card.amount,
    currency: card.currency,
    source: card.source,
    description: card.description,
    status: 'succeeded',
    charge_id: charge.id,
    created_at: new Date(charge.created * 1000).toISOString(),
    settled_at: null,
  });
  expect(chargesFor(clientKey)).toHaveLength(1);
}

async function recordOf(clientKey: string) {
  const key = scopedKey({ accountId: ACCOUNT, operation: 'POST /payments', key: clientKey });
  const { Item } = await db.send(
    new GetCommand({ TableName: env.IDEMPOTENCY_TABLE, Key: { pk: key }, ConsistentRead: true }),
  );
  return Item;
}

async function emailsFor(paymentId: string) {
  return sandbox.emails().filter((email) => email.metadata?.payment_id === paymentId);
}

describe('a client that never comes back', () => {
  it('after drop_after_charge: the payment appears within the bound, and a late retry replays its 201', async () => {
    const key = randomUUID();
    await sandboxCall('POST', '/__faults', { mode: 'drop_after_charge' });
    const endedAt = Date.now();
    expect((await pay(key)).status).toBe(502);
    const { charge, payment } = await paymentAppears(key);
    expect(Date.now() - endedAt).toBeLessThan(BOUND_MS);
    await eventually(
      () => paymentFor(payment.id),
      (p) => p?.status === 'settled',
      BOUND_MS,
    );
    expect(await emailsFor(payment.id)).toHaveLength(1);
    await expectLateRetryReplays(key, charge);
  });

  it('after a 504 that hid a charge the processor finished later: the payment appears from the charge', async () => {
    const key = randomUUID();
    await sandboxCall('POST', '/__faults', { mode: 'delay', ms: 2500 }); // longer than the 2 s processor timeout
    expect((await pay(key)).status).toBe(504);
    const { charge } = await paymentAppears(key, 2500 + BOUND_MS);
    await expectLateRetryReplays(key, charge);
  });

  it('after a 503 that made no charge: the operation is abandoned, and a later retry charges once', async () => {
    const key = randomUUID();
    await sandboxCall('POST', '/__faults', { mode: 'error_503' });
    expect((await pay(key)).status).toBe(503);
    const abandoned = await eventually(
      () => recordOf(key),
      (item) => item?.status === RecordStatus.Abandoned,
      BOUND_MS,
    );
    expect(chargesFor(key)).toEqual([]);
    const later = await pay(key);
    expect(later.status).toBe(201);
    expect(later.headers.get('idempotent-replayed')).toBeNull();
    const charges = chargesFor(key);
    expect(charges).toHaveLength(1);
    // The same operation, reached under the same downstream key it was abandoned with.
    expect(charges[0]!.idempotency_key).toBe(abandoned!.downstreamKey);
  });

  it('with webhooks switched off, the completer alone records the payment within the bound', async () => {
    const key = randomUUID();
    await sandboxCall('PUT', '/__webhooks', { enabled: false });
    await sandboxCall('POST', '/__faults', { mode: 'drop_after_charge' });
    const endedAt = Date.now();
    expect((await pay(key)).status).toBe(502);
    const { charge } = await paymentAppears(key);
    expect(Date.now() - endedAt).toBeLessThan(BOUND_MS);
    // The event was recorded but never delivered: only the completer can have recorded this payment.
    const events = sandbox.events().filter((event) => event.data.object.id === charge.id);
    expect(events).toHaveLength(1);
    expect(sandbox.deliveries().filter((delivery) => delivery.event_id === events[0]!.id)).toEqual([]);
    await expectLateRetryReplays(key, charge);
  });

  it('when the API dies mid-charge and nobody retries: the payment appears once the stack is back', async () => {
    const key = randomUUID();
    await sandboxCall('POST', '/__faults', { mode: 'delay', ms: 1500 });
    const doomed = pay(key).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await stack.crash();
    expect(String(await doomed)).toMatch(/fetch failed/);
    // The processor finishes the charge anyway; its webhook finds nobody listening.
    await eventually(
      () => chargesFor(key),
      (charges) => charges.length === 1,
      5000,
    );
    stack = await startStackProcess(env, port);
    const { charge } = await paymentAppears(key);
    await expectLateRetryReplays(key, charge);
  });
});

describe('events about a recorded payment', () => {
  it('sends one receipt for two distinct events about one payment', async () => {
    const response = await pay(randomUUID());
    const created = (await response.json()) as Payment;
    await eventually(
      () => paymentFor(created.id),
      (p) => p?.status === 'settled',
      10_000,
    );
    const original = sandbox.events().find((event) => event.data.object.id === created.charge_id)!;
    const second = { ...original, id: `evt_second_${randomUUID().replaceAll('-', '')}` };
    expect((await postSigned(second)).status).toBe(200);
    await waitForQueueToSettle();
    expect(await emailsFor(created.id)).toHaveLength(1);
  });

  it('applies no event whose charge is not the payment’s: it reaches the DLQ, and nothing is emailed', async () => {
    const response = await pay(randomUUID());
    const created = (await response.json()) as Payment;
    await eventually(
      () => paymentFor(created.id),
      (p) => p?.status === 'settled',
      10_000,
    );
    const original = sandbox.events().find((event) => event.data.object.id === created.charge_id)!;
    const forged = {
      ...original,
      id: `evt_forged_${randomUUID().replaceAll('-', '')}`,
      data: { object: { ...original.data.object, id: 'ch_not_this_payments' } },
    };
    expect((await postSigned(forged)).status).toBe(200);
    const dlqUrl = (await sqs.client.send(new GetQueueUrlCommand({ QueueName: `${env.SETTLEMENT_QUEUE_NAME}-dlq` })))
      .QueueUrl!;
    const dead = await eventually(
      async () =>
        (
          await sqs.client.send(
            new ReceiveMessageCommand({ QueueUrl: dlqUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
          )
        ).Messages ?? [],
      (messages) => messages.some((message) => message.Body?.includes(forged.id)),
      10_000,
    );
    expect(dead.length).toBeGreaterThan(0);
    expect(await emailsFor(created.id)).toHaveLength(1);
    // The line is written right after the copy lands in the DLQ: give the child's stdout a moment.
    await eventually(
      () => stack.output().includes('record can never succeed; moved to the dead-letter queue'),
      (logged) => logged,
      5000,
    );
  });
});

function postSigned(event: unknown) {
  const body = JSON.stringify(event);
  return fetch(`${stack.url}/webhooks/processor`, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      'Processor-Signature': signPayload(body, SECRET, Math.floor(Date.now() / 1000)),
    },
    body,
  });
}

/** Gives the consumer time to take and finish what was just enqueued (it long-polls with a 1 s wait). */
function waitForQueueToSettle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 2500));
}
