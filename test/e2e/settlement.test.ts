import { randomUUID } from 'node:crypto';
import {
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import type { OpenAPIObject } from 'openapi3-ts/oas31';
import { freePort } from '../../lib/local/free-port';
import { type LocalSqs, startLocalSqs } from '../../lib/local/sqs';
import { type Sandbox, startSandbox } from '../../lib/sandbox/processor';
import { signPayload } from '../../lib/webhooks/signature';
import { type StackProcess, startStackProcess } from '../support/local-stack-process';
import { OpenApiContract } from '../support/openapi-contract';

/**
 * Webhooks and the settlement queue end to end. The sandbox (processor, mailer, webhook sender) and SQS belong to the
 * test, so they outlive a crashed API process; the stack process is what `npm start` runs. Every response the API
 * gives is checked against the OpenAPI document the stack serves.
 */
jest.setTimeout(90_000);

const SECRET = 'whsec_e2e_settlement';
const API_KEY = 'sk_test_settlement';
let sandbox: Sandbox;
let sqs: LocalSqs;
let port: number;
let stack: StackProcess;
let env: Record<string, string>;
let contract: OpenApiContract;

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
    SETTLEMENT_QUEUE_NAME: `settlement-${randomUUID().slice(0, 8)}`,
    PROCESSOR_WEBHOOK_SECRET: SECRET,
    IDEMPOTENCY_TABLE: `e2e-idem-${randomUUID().slice(0, 8)}`,
    PAYMENTS_TABLE: `e2e-pay-${randomUUID().slice(0, 8)}`,
    LOCAL_API_KEYS: `${API_KEY}:acct_s`,
    // Short clocks so redelivery and takeover happen within a test: consumer timeout + 1 s (the lease margin) <=
    // lease <= visibility timeout, and the fewest receives settlement's waits for a live owner need.
    CONSUMER_FUNCTION_TIMEOUT_MS: '1500',
    IDEMPOTENCY_LEASE_SECONDS: '3',
    SETTLEMENT_VISIBILITY_SECONDS: '3',
    SETTLEMENT_MAX_RECEIVE_COUNT: '4',
    API_FUNCTION_TIMEOUT_MS: '1800',
    PROCESSOR_TIMEOUT_MS: '1500',
    MAILER_TIMEOUT_MS: '1000',
    COMPLETER_INTERVAL_SECONDS: '1',
  };
  stack = await startStackProcess(env, port);
  contract = new OpenApiContract((await (await fetch(`${stack.url}/openapi.json`)).json()) as OpenAPIObject);
});
afterAll(async () => {
  await stack?.stop();
  await sandbox?.close();
  await sqs?.close();
});

interface Payment {
  id: string;
  status: string;
  settled_at: string | null;
  charge_id: string;
}

async function pay(url = stack.url): Promise<Payment> {
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

async function payment(id: string, url = stack.url): Promise<Payment> {
  const response = await fetch(`${url}/payments/${id}`, { headers: { Authorization: `Bearer ${API_KEY}` } });
  await contract.check('GET /payments/{id}', response);
  return (await response.json()) as Payment;
}

const emailsFor = (paymentId: string) =>
  sandbox.emails().filter((email) => (email.metadata as Record<string, string> | undefined)?.payment_id === paymentId);
const eventFor = (chargeId: string) => sandbox.events().find((event) => event.data.object.id === chargeId);

async function eventually<T>(probe: () => Promise<T> | T, done: (value: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`condition not met in ${timeoutMs} ms; last value ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function signedPost(body: string, signature: string) {
  const response = await fetch(`${stack.url}/webhooks/processor`, {
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
    const resend = await fetch(`${sandbox.url}/__webhooks/resend`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ event_id: event!.id, times: 5 }),
    });
    expect(resend.ok).toBe(true);
    // The same event enqueued again as a brand-new SQS message (new message id), bypassing the webhook dedupe.
    await sqs.client.send(new SendMessageCommand({ QueueUrl: await queueUrl(), MessageBody: JSON.stringify(event) }));
    await new Promise((resolve) => setTimeout(resolve, 2500));

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
    const stale = await signedPost(body, signPayload(body, SECRET, now - 301));
    expect(stale.status).toBe(401);
    expect((await signedPost(body, 'garbage')).status).toBe(401);
    const tampered = body.replace('"amount":1999', '"amount":1');
    expect((await signedPost(tampered, signPayload(body, SECRET, now))).status).toBe(401);
    expect(emailsFor(paid.id)).toHaveLength(1);
  });

  it('rejects a malformed event with a valid signature with 400', async () => {
    const body = JSON.stringify({ id: 'not-an-event', type: 'charge.succeeded' });
    const response = await signedPost(body, signPayload(body, SECRET, Math.floor(Date.now() / 1000)));
    expect(response.status).toBe(400);
  });

  it('refuses an event id too long to be its idempotency key with 400 invalid-body naming it', async () => {
    const paid = await pay();
    const event = await eventually(
      () => eventFor(paid.charge_id),
      (e) => e !== undefined,
    );
    const body = JSON.stringify({ ...event, id: `evt_${'x'.repeat(252)}` });
    const response = await signedPost(body, signPayload(body, SECRET, Math.floor(Date.now() / 1000)));
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({
      type: 'https://keystone-idempotency.dev/problems/invalid-body',
      errors: [{ path: 'id' }],
    });
    const longest = JSON.stringify({ ...event, id: `evt_${'x'.repeat(251)}` });
    expect((await signedPost(longest, signPayload(longest, SECRET, Math.floor(Date.now() / 1000)))).status).toBe(200);
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
    const response = await signedPost(body, signPayload(body, SECRET, Math.floor(Date.now() / 1000)));
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
    await fetch(`${sandbox.url}/__faults`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ mode: 'delay', ms: 2000, count: 1, target: 'emails' }),
    });
    const paid = await pay();
    await eventually(
      async () => (await (await fetch(`${sandbox.url}/__faults`)).json()) as unknown[],
      (pending) => pending.length === 0,
    );
    await stack.crash();
    await eventually(
      () => emailsFor(paid.id).length,
      (n) => n === 1,
    );
    stack = await startStackProcess(env, port);
    const settled = await eventually(
      () => payment(paid.id),
      (p) => p.status === 'settled',
      30_000,
    );
    expect(settled.settled_at).toEqual(expect.any(String));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(emailsFor(paid.id)).toHaveLength(1);
  });

  it('keeps a copy of an event waiting while its original is still settling: nothing reaches the DLQ', async () => {
    // SQS delivers at least once: a copy of an event can arrive while the original still holds its key (here, a slow
    // mailer). The copy used to come back every second, spend its receives in about four and land in the DLQ while
    // the original was still working. It now comes back when the original's lease has run out, and replays.
    const slowEnv = {
      ...env,
      SETTLEMENT_QUEUE_NAME: `inflight-${randomUUID().slice(0, 8)}`,
      CONSUMER_FUNCTION_TIMEOUT_MS: '8000',
      MAILER_TIMEOUT_MS: '7000',
      IDEMPOTENCY_LEASE_SECONDS: '9',
      SETTLEMENT_VISIBILITY_SECONDS: '10',
      SETTLEMENT_MAX_RECEIVE_COUNT: '4',
    };
    await sandboxCall('PUT', '/__webhooks', { enabled: false }); // this test delivers the event itself
    const slow = await startStackProcess(slowEnv);
    try {
      const paid = await pay(slow.url);
      const event = await eventually(
        () => eventFor(paid.charge_id),
        (e) => e !== undefined,
      );
      const url = await queueUrl(slowEnv.SETTLEMENT_QUEUE_NAME);
      await sandboxCall('POST', '/__faults', { mode: 'delay', ms: 6000, count: 1, target: 'emails' });
      await sqs.client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: JSON.stringify(event) }));
      await eventually(
        async () => (await (await fetch(`${sandbox.url}/__faults`)).json()) as unknown[],
        (pending) => pending.length === 0, // the original is in the mailer now, holding the event's key
      );
      await sqs.client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: JSON.stringify(event) }));
      await eventually(
        () => messagesIn(url),
        (count) => count === 0, // both acknowledged: the original settled, the copy replayed (or went to the DLQ)
        40_000,
      );
      expect(await messagesIn(await queueUrl(`${slowEnv.SETTLEMENT_QUEUE_NAME}-dlq`))).toBe(0);
      expect(emailsFor(paid.id)).toHaveLength(1);
      expect((await payment(paid.id, slow.url)).status).toBe('settled');
    } finally {
      await slow.stop();
      await sandboxCall('PUT', '/__webhooks', { enabled: true });
    }
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
    const url = await queueUrl();
    await Promise.all([
      sqs.client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: poison })),
      sqs.client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: JSON.stringify(event) })),
    ]);
    const dlqUrl = await queueUrl(`${env.SETTLEMENT_QUEUE_NAME}-dlq`);
    const dead = await eventually(
      async () =>
        (
          await sqs.client.send(
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

/** Stops or resumes the sandbox's delivery of new events, so a test can deliver an event of its own making. */
async function setWebhookDelivery(enabled: boolean): Promise<void> {
  const response = await fetch(`${sandbox.url}/__webhooks`, {
    method: 'PUT',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ enabled }),
  });
  expect(response.ok).toBe(true);
}

async function queueUrl(name = env.SETTLEMENT_QUEUE_NAME): Promise<string> {
  const { QueueUrl } = await sqs.client.send(new GetQueueUrlCommand({ QueueName: name }));
  if (!QueueUrl) throw new Error(`no queue ${name}`);
  return QueueUrl;
}

/** Messages in a queue, visible or in flight. */
async function messagesIn(url: string): Promise<number> {
  const { Attributes } = await sqs.client.send(
    new GetQueueAttributesCommand({
      QueueUrl: url,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return (
    Number(Attributes?.ApproximateNumberOfMessages ?? 0) +
    Number(Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
  );
}

async function sandboxCall(method: string, path: string, body: unknown): Promise<void> {
  const response = await fetch(`${sandbox.url}${path}`, {
    method,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}`);
}
