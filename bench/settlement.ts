import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { freePort } from '@keystone-idempotency/local-aws/free-port';
import type { LocalLog } from '@keystone-idempotency/local-aws/log';
import { type LocalStack, startLocalStack } from '../lib/local/stack';
import { dynamoDbConfig } from '../lib/runtime/clients';
import { type Sandbox, startSandbox } from '../lib/sandbox/processor';
import { type LatencySummary, summarize } from './measure';

/**
 * How fast a charge settles, end to end through the local stack with its default timings (the ones `npm start` runs
 * with): the processor's signed event, the webhook receiver, the settlement queue, the consumer, the payment settled
 * and its receipt sent. Charge time is when the charge appears in the sandbox's ledger (it runs in this process,
 * polled every 10 ms); settled time is the payment's `settled_at`, read from the payments table (polling the API
 * would load the very stack measured).
 *
 * - a burst: `burst` payments at once, every one of which must settle with one receipt;
 * - early events: the processor charges (and sends its event) at once but answers 1.5 s later, so the event
 *   arrives before the payment is recorded. The consumer must send it back for a second, not for the queue's
 *   visibility timeout (60 s).
 *
 * These were test verdicts (p99 under 5 s) until a full `npm test` on a loaded 2-core machine showed they measure
 * the machine as much as the code: test/e2e/settlement-latency.test.ts keeps what is deterministic.
 */
export interface SettlementOptions {
  readonly dynamoDbEndpoint: string;
  /** Payments sent at once. */
  readonly burst: number;
  /** Payments whose event arrives early, one after another. */
  readonly earlyEvents: number;
}

export interface SettlementResult {
  readonly burst: {
    readonly payments: number;
    readonly chargeToSettledMs: LatencySummary;
    /** Every payment of the burst settled, with exactly one receipt. */
    readonly allSettledOnce: boolean;
  };
  readonly earlyEvent: {
    /** How long after the charge the processor answered (the event was sent at the charge). */
    readonly answerDelayMs: number;
    readonly chargeToSettledMs: LatencySummary;
  };
}

const API_KEY = 'sk_bench_settlement';
const ACCOUNT = 'acct_bench_settlement';
const ANSWER_DELAY_MS = 1500;
const SILENT: LocalLog = { info: () => undefined, error: () => undefined };

export async function measureSettlement(options: SettlementOptions): Promise<SettlementResult> {
  const port = await freePort();
  const secret = `whsec_${randomUUID().replaceAll('-', '')}`;
  const sandbox = await startSandbox({
    port: 0,
    webhookUrl: `http://127.0.0.1:${port}/webhooks/processor`,
    webhookSecret: secret,
  });
  const suffix = randomUUID().slice(0, 8);
  const db = DynamoDBDocumentClient.from(
    new DynamoDBClient(dynamoDbConfig({ DYNAMODB_ENDPOINT: options.dynamoDbEndpoint })),
  );
  let stack: LocalStack | undefined;
  const chargedAt = new Map<string, number>();
  const watching = setInterval(() => {
    for (const charge of sandbox.charges()) if (!chargedAt.has(charge.id)) chargedAt.set(charge.id, Date.now());
  }, 10);
  try {
    stack = await startLocalStack({
      env: {
        PORT: String(port),
        DYNAMODB_ENDPOINT: options.dynamoDbEndpoint,
        PROCESSOR_URL: sandbox.url,
        PROCESSOR_WEBHOOK_SECRET: secret,
        IDEMPOTENCY_TABLE: `bench-settle-idem-${suffix}`,
        PAYMENTS_TABLE: `bench-settle-pay-${suffix}`,
        SETTLEMENT_QUEUE_NAME: `bench-settle-${suffix}`,
        LOCAL_API_KEYS: `${API_KEY}:${ACCOUNT}`,
      },
      log: SILENT,
    });
    const run = { stack, sandbox, db, chargedAt };

    const burst = await Promise.all(Array.from({ length: options.burst }, () => pay(run)));
    const burstLatencies = await chargeToSettled(run, burst);
    const receipts = (id: string) => sandbox.emails().filter((email) => email.metadata?.payment_id === id).length;
    const allSettledOnce = burst.every((payment) => receipts(payment.id) === 1);

    const early: number[] = [];
    for (let i = 0; i < options.earlyEvents; i++) {
      await fetch(`${sandbox.url}/__faults`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ mode: 'delay_after_charge', ms: ANSWER_DELAY_MS }),
      });
      early.push(...(await chargeToSettled(run, [await pay(run)])));
    }
    return {
      burst: { payments: burst.length, chargeToSettledMs: summarize(burstLatencies), allSettledOnce },
      earlyEvent: { answerDelayMs: ANSWER_DELAY_MS, chargeToSettledMs: summarize(early) },
    };
  } finally {
    clearInterval(watching);
    await stack?.stop();
    await sandbox.close();
    db.destroy();
  }
}

interface Run {
  readonly stack: LocalStack;
  readonly sandbox: Sandbox;
  readonly db: DynamoDBDocumentClient;
  readonly chargedAt: ReadonlyMap<string, number>;
}

interface Payment {
  readonly id: string;
  readonly charge_id: string;
}

async function pay({ stack }: Run): Promise<Payment> {
  const response = await fetch(`${stack.apiUrl}/payments`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${API_KEY}`,
      'Content-Type': 'application/json',
      'Idempotency-Key': randomUUID(),
    },
    body: JSON.stringify({ amount: 1250, currency: 'eur', source: 'tok_visa' }),
  });
  if (response.status !== 201) throw new Error(`POST /payments answered ${response.status}: ${await response.text()}`);
  return (await response.json()) as Payment;
}

/** Milliseconds from each charge to its payment's settlement, once every one of them has settled. */
async function chargeToSettled({ stack, db, chargedAt }: Run, payments: readonly Payment[]): Promise<number[]> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const { Items = [] } = await db.send(
      new QueryCommand({
        TableName: stack.tables.payments,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': `ACCOUNT#${ACCOUNT}` },
        ConsistentRead: true,
      }),
    );
    const settledAt = new Map(Items.map((item) => [item.id as string, item.settled_at as string | null]));
    if (payments.every((payment) => settledAt.get(payment.id) && chargedAt.has(payment.charge_id))) {
      return payments.map((payment) => Date.parse(settledAt.get(payment.id)!) - chargedAt.get(payment.charge_id)!);
    }
    if (Date.now() > deadline) throw new Error(`${payments.length} payments did not all settle within 120 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * `npx tsx bench/settlement.ts`: this part alone, against a DynamoDB Local of its own, printed as JSON
 * (BENCH_SETTLEMENT_BURST, BENCH_SETTLEMENT_EARLY).
 */
if (require.main === module) {
  void (async () => {
    const { startDynamoDbLocal } = await import('@keystone-idempotency/local-aws/dynamodb-local');
    const db = await startDynamoDbLocal();
    try {
      const result = await measureSettlement({
        dynamoDbEndpoint: db.endpoint,
        burst: Number(process.env.BENCH_SETTLEMENT_BURST ?? 50),
        earlyEvents: Number(process.env.BENCH_SETTLEMENT_EARLY ?? 5),
      });
      console.log(JSON.stringify(result, null, 2));
    } finally {
      await db.stop();
    }
  })();
}
