import { randomUUID } from 'node:crypto';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { freePort } from '../../lib/local/free-port';
import { type LocalSqs, startLocalSqs } from '../../lib/local/sqs';
import { type Sandbox, startSandbox } from '../../lib/sandbox/processor';
import { localDocumentClient } from '../support/dynamodb';
import { type StackProcess, startStackProcess } from '../support/local-stack-process';

/**
 * How fast a charge settles, with the local stack's default timings (the ones `npm start` runs with). The processor
 * sends its event right after charging, usually before our commit: such an early event must come back in about a
 * second, not after the queue's visibility timeout. Charge time is when the charge first appears in the sandbox's
 * ledger (it runs in this process; polled every 10 ms); settled time is the payment's `settled_at`, read from the
 * payments table with one query per poll (polling 50 payments through the API would load the very stack measured).
 */
jest.setTimeout(120_000);

const SECRET = 'whsec_e2e_latency';
const API_KEY = 'sk_test_latency';
let sandbox: Sandbox;
let sqs: LocalSqs;
let stack: StackProcess;
const ACCOUNT = 'acct_latency';
const PAYMENTS_TABLE = `e2e-pay-${randomUUID().slice(0, 8)}`;
const chargedAt = new Map<string, number>();
let watching: NodeJS.Timeout;
const db = localDocumentClient();

beforeAll(async () => {
  const port = await freePort();
  sqs = await startLocalSqs();
  sandbox = await startSandbox({
    port: 0,
    webhookUrl: `http://127.0.0.1:${port}/webhooks/processor`,
    webhookSecret: SECRET,
  });
  stack = await startStackProcess(
    {
      DYNAMODB_ENDPOINT: process.env.DYNAMODB_ENDPOINT!,
      PROCESSOR_URL: sandbox.url,
      SQS_ENDPOINT: sqs.endpoint,
      SETTLEMENT_QUEUE_NAME: `latency-${randomUUID().slice(0, 8)}`,
      PROCESSOR_WEBHOOK_SECRET: SECRET,
      IDEMPOTENCY_TABLE: `e2e-idem-${randomUUID().slice(0, 8)}`,
      PAYMENTS_TABLE,
      LOCAL_API_KEYS: `${API_KEY}:${ACCOUNT}`,
    },
    port,
  );
  watching = setInterval(() => {
    for (const charge of sandbox.charges()) if (!chargedAt.has(charge.id)) chargedAt.set(charge.id, Date.now());
  }, 10);
});
afterAll(async () => {
  clearInterval(watching);
  await stack?.stop();
  await sandbox?.close();
  await sqs?.close();
  db.destroy();
});

interface Payment {
  id: string;
  status: string;
  charge_id: string;
  settled_at: string | null;
}

async function pay(): Promise<Payment> {
  const response = await fetch(`${stack.url}/payments`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${API_KEY}`,
      'Content-Type': 'application/json',
      'Idempotency-Key': randomUUID(),
    },
    body: JSON.stringify({ amount: 1250, currency: 'eur', source: 'tok_visa' }),
  });
  expect(response.status).toBe(201);
  return (await response.json()) as Payment;
}

/** Milliseconds from each charge to its payment's settlement, once every one of them has settled. */
async function chargeToSettled(payments: Payment[], timeoutMs = 30_000): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { Items = [] } = await db.send(
      new QueryCommand({
        TableName: PAYMENTS_TABLE,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': `ACCOUNT#${ACCOUNT}` },
        ConsistentRead: true,
      }),
    );
    const settledAt = new Map(Items.map((item) => [item.id as string, item.settled_at as string | null]));
    if (payments.every((payment) => settledAt.get(payment.id))) {
      return payments.map((payment) => Date.parse(settledAt.get(payment.id)!) - chargedAt.get(payment.charge_id)!);
    }
    if (Date.now() > deadline) throw new Error(`not all ${payments.length} payments settled within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

it('settles a payment whose event arrived before the payment was recorded within 5 s', async () => {
  // The processor charges (and sends its event) at once, but answers 1.5 s later: the event is surely early.
  await fetch(`${sandbox.url}/__faults`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ mode: 'delay_after_charge', ms: 1500 }),
  });
  const [latency] = await chargeToSettled([await pay()]);
  expect(latency).toBeGreaterThan(1500); // it could not settle before the payment was recorded
  expect(latency).toBeLessThan(5000);
});

it('settles a 50-way burst with a charge-to-settled p99 under 5 s', async () => {
  const payments = await Promise.all(Array.from({ length: 50 }, () => pay()));
  const latencies = (await chargeToSettled(payments)).sort((a, b) => a - b);
  const p99 = latencies[Math.ceil(0.99 * latencies.length) - 1]!;
  console.info(`charge-to-settled, 50 payments at once: p50 ${latencies[24]} ms, p99 ${p99} ms`);
  expect(p99).toBeLessThan(5000);
});
