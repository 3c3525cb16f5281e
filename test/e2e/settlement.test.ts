import { randomUUID } from 'node:crypto';
import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import type { OpenAPIObject } from 'openapi3-ts/oas31';
import { signPayload } from '../../lib/webhooks/signature';
import { e2eStack } from '../support/e2e-stack';
import { eventually } from '../support/eventually';
import { OpenApiContract } from '../support/openapi-contract';

/**
 * Webhooks and the settlement queue end to end. The sandbox (processor, mailer, webhook sender) and SQS belong to the
 * test, so they outlive a crashed API process; the stack process is what `npm start` runs. Every response the API
 * gives is checked against the OpenAPI document the stack serves.
 */
jest.setTimeout(90_000);

const API_KEY = 'sk_test_settlement';
const e2e = e2eStack({
  name: 'settlement',
  apiKeys: { [API_KEY]: 'acct_s' },
  webhooks: true,
  // Short clocks so redelivery and takeover happen within a test: consumer timeout + 1 s (the lease margin) <=
  // lease <= visibility timeout, and the fewest receives settlement's waits for a live owner need.
  settings: {
    CONSUMER_FUNCTION_TIMEOUT_MS: '1500',
    IDEMPOTENCY_LEASE_SECONDS: '3',
    SETTLEMENT_VISIBILITY_SECONDS: '3',
    SETTLEMENT_MAX_RECEIVE_COUNT: '4',
    API_FUNCTION_TIMEOUT_MS: '1800',
    PROCESSOR_TIMEOUT_MS: '1500',
    MAILER_TIMEOUT_MS: '1000',
    COMPLETER_INTERVAL_SECONDS: '1',
  },
});
let contract: OpenApiContract;

beforeAll(async () => {
  contract = new OpenApiContract((await (await fetch(`${e2e.url}/openapi.json`)).json()) as OpenAPIObject);
});

interface Payment {
  id: string;
  status: string;
  settled_at: string | null;
  charge_id: string;
}

async function pay(url = e2e.url): Promise<Payment> {
  const response = await fetch(`${url}/payments`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${API_KEY}`,
      'Content-Type': 'application/json',
      'Idempotency-Key': randomUUID(),
    },
    body: JSON.stringify({ amount: 1999, currency: 'eur', source: 'tok_visa' }),
  });
  await contract.check('POST /payments', response);
  expect(response.status).toBe(201);
  return (await response.json()) as Payment;
}

async function payment(id: string, url = e2e.url): Promise<Payment> {
  const response = await fetch(`${url}/payments/${id}`, { headers: { Authorization: `Bearer ${API_KEY}` } });
  await contract.check('GET /payments/{id}', response);
  return (await response.json()) as Payment;
}

const emailsFor = (paymentId: string) =>
  e2e.sandbox
    .emails()
    .filter((email) => (email.metadata as Record<string, string> | undefined)?.payment_id === paymentId);
const eventFor = (chargeId: string) => e2e.sandbox.events().find((event) => event.data.object.id === chargeId);

async function signedPost(body: string, signature: string) {
  const response = await fetch(`${e2e.url}/webhooks/processor`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Processor-Signature': signature },
    body,
  });
  await contract.check('POST /webhooks/processor', response);
  return response;
}

describe('settlement from processor webhooks', () => {
  it('settles once and sends one receipt however often the event arrives', async () => {
    const paid = await pay();
    const settled = await eventually(
      () => payment(paid.id),
      (p) => p.status === 'settled',
    );
    expect(settled.settled_at).toEqual(expect.any(String));
    await eventually(
      () => emailsFor(paid.id).length,
      (n) => n === 1,
    );

    const event = eventFor(paid.charge_id);
    expect(event).toBeDefined();
    const resend = await fetch(`${e2e.sandbox.url}/__webhooks/resend`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ event_id: event!.id, times: 5 }),
    });
    expect(resend.ok).toBe(true);
    // The same event enqueued again as a brand-new SQS message (new message id), bypassing the webhook dedupe.
    await e2e.sqs.client.send(
      new SendMessageCommand({ QueueUrl: await e2e.queueUrl(), MessageBody: JSON.stringify(event) }),
    );
    // The resends were answered before the call returned; the new message is handled once the queue is empty.
    await e2e.queueDrained();

    expect(emailsFor(paid.id)).toHaveLength(1);
    const after = await payment(paid.id);
    expect(after.status).toBe('settled');
    expect(after.settled_at).toBe(settled.settled_at);
  });

  it('rejects a forged or stale signature with 401 and changes nothing', async () => {
    const paid = await pay();
    const event = await eventually(
      () => eventFor(paid.charge_id),
      (e) => e !== undefined,
    );
    await eventually(
      () => emailsFor(paid.id).length,
      (n) => n === 1,
    );
    const body = JSON.stringify(event);
    const now = Math.floor(Date.now() / 1000);
    const forged = await signedPost(body, signPayload(body, 'whsec_wrong', now));
    expect(forged.status).toBe(401);
    expect(forged.headers.get('content-type')).toBe('application/problem+json');
    const stale = await signedPost(body, signPayload(body, e2e.webhookSecret, now - 301));
    expect(stale.status).toBe(401);
    expect((await signedPost(body, 'garbage')).status).toBe(401);
    const tampered = body.replace('"amount":1999', '"amount":1');
    expect((await signedPost(tampered, signPayload(body, e2e.webhookSecret, now))).status).toBe(401);
    expect(emailsFor(paid.id)).toHaveLength(1);
  });

  it('rejects a malformed event with a valid signature with 400', async () => {
    const body = JSON.stringify({ id: 'not-an-event', type: 'charge.succeeded' });
    const response = await signedPost(body, signPayload(body, e2e.webhookSecret, Math.floor(Date.now() / 1000)));
    expect(response.status).toBe(400);
  });

  it('refuses an event id too long to be its idempotency key with 400 invalid-body naming it', async () => {
    const paid = await pay();
    const event = await eventually(
      () => eventFor(paid.charge_id),
      (e) => e !== undefined,
    );
    const body = JSON.stringify({ ...event, id: `evt_${'x'.repeat(252)}` });
    const response = await signedPost(body, signPayload(body, e2e.webhookSecret, Math.floor(Date.now() / 1000)));
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({
      type: 'https://keystone-idempotency.dev/problems/invalid-body',
      errors: [{ path: 'id' }],
    });
    const longest = JSON.stringify({ ...event, id: `evt_${'x'.repeat(251)}` });
    expect(
      (await signedPost(longest, signPayload(longest, e2e.webhookSecret, Math.floor(Date.now() / 1000)))).status,
    ).toBe(200);
  });

  // The processor's events are not ours to validate away: a description edited at the processor can hold anything
  // JSON can, including characters an SQS message can't (U+FFFE, U+FFFF; and astral ones, which the emulator refuses).
  it.each([
    ['U+FFFF', 'Order 42 \uFFFF'],
    ['U+FFFE', '\uFFFE'],
    ['a lone surrogate', 'Order \uD800 42'],
    ['a C0 control character', 'Order\u0001 42'],
    ['an astral character', 'Order 42 \u{1F389}'],
  ])('settles and sends the receipt for an event whose charge description holds %s', async (_name, description) => {
    await setWebhookDelivery(false);
    let paid: Payment;
    try {
      paid = await pay();
    } finally {
      await setWebhookDelivery(true);
    }
    const event = await eventually(
      () => eventFor(paid.charge_id),
      (e) => e !== undefined,
    );
    const edited = { ...event!, data: { object: { ...event!.data.object, description } } };
    const body = JSON.stringify(edited);
    const response = await signedPost(body, signPayload(body, e2e.webhookSecret, Math.floor(Date.now() / 1000)));
    expect(response.status).toBe(200);
    const settled = await eventually(
      () => payment(paid.id),
      (p) => p.status === 'settled',
    );
    expect(settled.settled_at).toEqual(expect.any(String));
    await eventually(
      () => emailsFor(paid.id).length,
      (n) => n === 1,
    );
  });

  it('sends no second email when the consumer crashes after sending it and before acknowledging', async () => {
    // The mailer takes 2 s to answer the next email; the stack is killed while it waits. The mailer still sends it
    // (its caller hung up, the work completes), and the message is redelivered to the restarted consumer.
    await fetch(`${e2e.sandbox.url}/__faults`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ mode: 'delay', ms: 2000, count: 1, target: 'emails' }),
    });
    const paid = await pay();
    await eventually(
      async () => (await (await fetch(`${e2e.sandbox.url}/__faults`)).json()) as unknown[],
      (pending) => pending.length === 0,
    );
    await e2e.crash();
    await eventually(
      () => emailsFor(paid.id).length,
      (n) => n === 1,
    );
    await e2e.restart();
    const settled = await eventually(
      () => payment(paid.id),
      (p) => p.status === 'settled',
      30_000,
    );
    expect(settled.settled_at).toEqual(expect.any(String));
    await e2e.queueDrained();
    expect(emailsFor(paid.id)).toHaveLength(1);
  });

  it('moves a poison message to the DLQ while the rest of its batch succeeds', async () => {
    const paid = await pay();
    const event = await eventually(
      () => eventFor(paid.charge_id),
      (e) => e !== undefined,
    );
    await eventually(
      () => emailsFor(paid.id).length,
      (n) => n === 1,
    );
    const poison = `poison-${randomUUID()}`;
    const url = await e2e.queueUrl();
    await Promise.all([
      e2e.sqs.client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: poison })),
      e2e.sqs.client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: JSON.stringify(event) })),
    ]);
    const dlqUrl = await e2e.queueUrl('dlq');
    const dead = await eventually(
      async () =>
        (
          await e2e.sqs.client.send(
            new ReceiveMessageCommand({ QueueUrl: dlqUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
          )
        ).Messages ?? [],
      (messages) => messages.some((m) => m.Body === poison),
      30_000,
    );
    expect(dead.map((m) => m.Body)).toContain(poison);
    expect(emailsFor(paid.id)).toHaveLength(1);
    expect((await payment(paid.id)).status).toBe('settled');
  });
});

describe('a copy of an event that arrives while its original still settles', () => {
  // SQS delivers at least once: a copy of an event can arrive while the original still holds its key (here, a slow
  // mailer). The copy used to come back every second, spend its receives in about four and land in the DLQ while the
  // original was still working. It now comes back when the original's lease has run out, and replays.
  const slow = e2eStack({
    name: 'inflight',
    apiKeys: { [API_KEY]: 'acct_s' },
    // No webhooks: the test delivers the event itself, twice.
    settings: {
      CONSUMER_FUNCTION_TIMEOUT_MS: '8000',
      MAILER_TIMEOUT_MS: '7000',
      IDEMPOTENCY_LEASE_SECONDS: '9',
      SETTLEMENT_VISIBILITY_SECONDS: '10',
      SETTLEMENT_MAX_RECEIVE_COUNT: '4',
      API_FUNCTION_TIMEOUT_MS: '1800',
      PROCESSOR_TIMEOUT_MS: '1500',
      COMPLETER_INTERVAL_SECONDS: '1',
    },
  });

  it('waits for the original, then replays: nothing reaches the DLQ, one receipt', async () => {
    const paid = await pay(slow.url);
    const event = await eventually(
      () => slow.sandbox.events().find((e) => e.data.object.id === paid.charge_id),
      (e) => e !== undefined,
    );
    const url = await slow.queueUrl();
    await sandboxCall(slow.sandbox.url, 'POST', '/__faults', { mode: 'delay', ms: 6000, count: 1, target: 'emails' });
    await slow.sqs.client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: JSON.stringify(event) }));
    await eventually(
      async () => (await (await fetch(`${slow.sandbox.url}/__faults`)).json()) as unknown[],
      (pending) => pending.length === 0, // the original is in the mailer now, holding the event's key
    );
    await slow.sqs.client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: JSON.stringify(event) }));
    // Both acknowledged: the original settled, and the copy replayed (or went to the DLQ).
    await slow.queueDrained();
    const dead = await slow.sqs.client.send(
      new ReceiveMessageCommand({ QueueUrl: await slow.queueUrl('dlq'), MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    expect(dead.Messages ?? []).toEqual([]);
    expect(
      slow.sandbox.emails().filter((email) => (email.metadata as Record<string, string>)?.payment_id === paid.id),
    ).toHaveLength(1);
    expect((await payment(paid.id, slow.url)).status).toBe('settled');
  });
});

/** Stops or resumes the sandbox's delivery of new events, so a test can deliver an event of its own making. */
async function setWebhookDelivery(enabled: boolean): Promise<void> {
  await sandboxCall(e2e.sandbox.url, 'PUT', '/__webhooks', { enabled });
}

async function sandboxCall(sandboxUrl: string, method: string, path: string, body: unknown): Promise<void> {
  const response = await fetch(`${sandboxUrl}${path}`, {
    method,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}`);
}
