import { randomUUID } from 'node:crypto';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { RecordStatus, scopedKey } from 'keystone-idempotency/engine';
import type { Charge } from '../../lib/sandbox/charges';
import { signPayload } from '../../lib/webhooks/signature';
import { e2eStack } from '../support/e2e-stack';
import { eventually } from '../support/eventually';

/**
 * Payments whose client never comes back, end to end over HTTP. The witness is the sandbox processor's ledger:
 * every charge made under one of our keys must end as exactly one payment (and the operation's stored 201), and a
 * late retry replays that 201. The sandbox, SQS and DynamoDB belong to the test, so they outlive a killed API
 * process.
 *
 * Timings (the shared rules hold): processor 1.5 s < functions 2 s, functions + 1 s margin <= lease 3 s <= visibility
 * 4 s; completer every 1 s; TTL 60 s. The bound (a payment is recorded within twice the lease after its last attempt
 * ended) rests on recovery taking an operation over a lease after its release: that is checked on the record, not
 * with a stopwatch, which on a loaded machine would measure the machine.
 */
jest.setTimeout(120_000);

const LEASE_MS = 3000;
const API_KEY = 'sk_test_recovery';
const ACCOUNT = 'acct_recovery';
const e2e = e2eStack({
  name: 'recovery',
  apiKeys: { [API_KEY]: ACCOUNT },
  webhooks: true,
  settings: {
    IDEMPOTENCY_LEASE_SECONDS: String(LEASE_MS / 1000),
    IDEMPOTENCY_TTL_SECONDS: '60',
    API_FUNCTION_TIMEOUT_MS: '2000',
    CONSUMER_FUNCTION_TIMEOUT_MS: '2000',
    PROCESSOR_TIMEOUT_MS: '1500',
    MAILER_TIMEOUT_MS: '1000',
    SETTLEMENT_VISIBILITY_SECONDS: '4',
    SETTLEMENT_MAX_RECEIVE_COUNT: '5',
    COMPLETER_INTERVAL_SECONDS: '1',
  },
});
afterEach(async () => {
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

function pay(key: string, url = e2e.url) {
  return fetch(`${url}/payments`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${API_KEY}`, 'Content-Type': 'application/json', 'Idempotency-Key': key },
    body: JSON.stringify(card),
  });
}

async function sandboxCall(method: string, path: string, body?: unknown): Promise<void> {
  const response = await fetch(`${e2e.sandbox.url}${path}`, {
    method,
    headers: { 'Content-Type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}`);
}

/** Charges the processor made for one client key: the witness for "money moved for this operation". */
function chargesFor(clientKey: string): Charge[] {
  return e2e.sandbox.charges().filter((charge) => charge.metadata.operation_key?.endsWith(`|${clientKey}`));
}

async function paymentFor(id: string): Promise<Payment | undefined> {
  const response = await fetch(`${e2e.url}/payments/${id}`, { headers: { Authorization: `Bearer ${API_KEY}` } });
  return response.status === 200 ? ((await response.json()) as Payment) : undefined;
}

/** The one charge for a client key, and its payment once it is recorded. */
async function paymentAppears(clientKey: string): Promise<{ charge: Charge; payment: Payment }> {
  const [charge] = await eventually(
    () => chargesFor(clientKey),
    (charges) => charges.length === 1,
  );
  const payment = await eventually(
    () => paymentFor(charge!.metadata.payment_id!),
    (found) => found !== undefined,
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

/** The operation's record, as the stack's own store reads it (DynamoDB or PostgreSQL). */
function recordOf(clientKey: string) {
  return e2e.data.store.get(scopedKey({ accountId: ACCOUNT, operation: 'POST /payments', key: clientKey }));
}

/** Faults the sandbox still has pending: 0 once every armed one was drawn by a request. */
async function faultsPending(): Promise<number> {
  return ((await (await fetch(`${e2e.sandbox.url}/__faults`)).json()) as unknown[]).length;
}

async function emailsFor(paymentId: string) {
  return e2e.sandbox.emails().filter((email) => email.metadata?.payment_id === paymentId);
}

describe('a client that never comes back', () => {
  it('after drop_after_charge: the payment appears, settles, and a late retry replays its 201', async () => {
    const key = randomUUID();
    await sandboxCall('POST', '/__faults', { mode: 'drop_after_charge' });
    expect((await pay(key)).status).toBe(502);
    const { charge, payment } = await paymentAppears(key);
    await eventually(
      () => paymentFor(payment.id),
      (p) => p?.status === 'settled',
    );
    expect(await emailsFor(payment.id)).toHaveLength(1);
    await expectLateRetryReplays(key, charge);
  });

  it('after a 504 that hid a charge the processor finished later: the payment appears from the charge', async () => {
    const key = randomUUID();
    await sandboxCall('POST', '/__faults', { mode: 'delay', ms: 2500 }); // longer than the 2 s processor timeout
    expect((await pay(key)).status).toBe(504);
    const { charge } = await paymentAppears(key);
    await expectLateRetryReplays(key, charge);
  });

  it('after a 503 that made no charge: the operation is abandoned, and a later retry charges once', async () => {
    const key = randomUUID();
    await sandboxCall('POST', '/__faults', { mode: 'error_503' });
    expect((await pay(key)).status).toBe(503);
    const abandoned = await eventually(
      () => recordOf(key),
      (item) => item?.status === RecordStatus.Abandoned,
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

  it('with webhooks switched off, the completer alone records the payment, due a lease after the release', async () => {
    const key = randomUUID();
    await sandboxCall('PUT', '/__webhooks', { enabled: false });
    await sandboxCall('POST', '/__faults', { mode: 'drop_after_charge' });
    const sentAt = Date.now();
    expect((await pay(key)).status).toBe(502);
    const answeredAt = Date.now();
    // The bound's first half: the released operation is due for recovery a lease after its release, which happened
    // while the request ran. Recovery may not take it over before then, so the record still says so.
    const released = await recordOf(key);
    expect(released).toMatchObject({ status: RecordStatus.Released });
    expect(released!.recoverAt).toBeGreaterThanOrEqual(sentAt + LEASE_MS);
    expect(released!.recoverAt).toBeLessThanOrEqual(answeredAt + LEASE_MS);
    // The second half, the completer's period (1 s, under the lease), is checked at start by the timing rules.
    const { charge } = await paymentAppears(key);
    // The event was recorded but never delivered: only the completer can have recorded this payment.
    const events = e2e.sandbox.events().filter((event) => event.data.object.id === charge.id);
    expect(events).toHaveLength(1);
    expect(e2e.sandbox.deliveries().filter((delivery) => delivery.event_id === events[0]!.id)).toEqual([]);
    await expectLateRetryReplays(key, charge);
  });

  it('when the API dies mid-charge and nobody retries: the payment appears once the stack is back', async () => {
    const key = randomUUID();
    await sandboxCall('POST', '/__faults', { mode: 'delay', ms: 1500 });
    const doomed = pay(key).catch((error: unknown) => error);
    // The processor drew the delay: the charge is under way there. Now the API dies.
    await eventually(
      () => faultsPending(),
      (pending) => pending === 0,
    );
    await e2e.crash();
    expect(String(await doomed)).toMatch(/fetch failed/);
    // The processor finishes the charge anyway; its webhook finds nobody listening.
    await eventually(
      () => chargesFor(key),
      (charges) => charges.length === 1,
    );
    await e2e.restart();
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
    );
    const original = e2e.sandbox.events().find((event) => event.data.object.id === created.charge_id)!;
    const second = { ...original, id: `evt_second_${randomUUID().replaceAll('-', '')}` };
    expect((await postSigned(second)).status).toBe(200);
    await e2e.queueDrained();
    expect(await emailsFor(created.id)).toHaveLength(1);
  });

  it('applies no event whose charge is not the payment’s: it reaches the DLQ, and nothing is emailed', async () => {
    const response = await pay(randomUUID());
    const created = (await response.json()) as Payment;
    await eventually(
      () => paymentFor(created.id),
      (p) => p?.status === 'settled',
    );
    const original = e2e.sandbox.events().find((event) => event.data.object.id === created.charge_id)!;
    const forged = {
      ...original,
      id: `evt_forged_${randomUUID().replaceAll('-', '')}`,
      data: { object: { ...original.data.object, id: 'ch_not_this_payments' } },
    };
    expect((await postSigned(forged)).status).toBe(200);
    const dlqUrl = await e2e.queueUrl('dlq');
    const dead = await eventually(
      async () =>
        (
          await e2e.sqs.client.send(
            new ReceiveMessageCommand({ QueueUrl: dlqUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
          )
        ).Messages ?? [],
      (messages) => messages.some((message) => message.Body?.includes(forged.id)),
    );
    expect(dead.length).toBeGreaterThan(0);
    expect(await emailsFor(created.id)).toHaveLength(1);
    // The line is written right after the copy lands in the DLQ: give the child's stdout a moment.
    await eventually(
      () => e2e.process.output().includes('record can never succeed; moved to the dead-letter queue'),
      (logged) => logged,
    );
  });
});

function postSigned(event: unknown) {
  const body = JSON.stringify(event);
  return fetch(`${e2e.url}/webhooks/processor`, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      'Processor-Signature': signPayload(body, e2e.webhookSecret, Math.floor(Date.now() / 1000)),
    },
    body,
  });
}
