import { randomUUID } from 'node:crypto';
import type { Charge } from '../../lib/sandbox/charges';
import { type E2eStack, e2eStack, FRONT_DOORS } from '../support/e2e-stack';
import { eventually } from '../support/eventually';
import { descendantEnvironments } from '../support/process-environment';

/**
 * The local stack under a burst (issue 31, item 13), through both front doors, on both stores. Lambda counts an
 * invocation's timeout from when an environment starts running it, starts another environment for an invocation
 * that finds none free, and throttles past the function's concurrency limit; it never counts a queue as the
 * function's time. So fifty concurrent requests answer only 201 and 409 (with Retry-After), and a burst past a
 * function's cap is throttled: 429 with Retry-After through the REST API (its INTEGRATION_FAILURE gateway response,
 * mapped as the deployed stack maps it), and through the HTTP API the 500 `{"message":"Internal Server Error"}` a
 * deployed HTTP API answers and no setting of one changes (docs/local-stack.md). Nothing is charged for a throttled
 * request, and its retry is charged once.
 *
 * Before environments scaled, an invocation waited for one of four with its timeout running: fifty concurrent
 * requests answered 500, 503 and 504.
 *
 * The fifty run on `npm start`'s own timings (functions 10 s, the API's integration timeout 9 s, which counts the
 * waits and cold starts as API Gateway's does), the first of them on a stack no request has warmed.
 */
jest.setTimeout(180_000);

const API_KEY = 'sk_test_burst';
const ACCOUNT = 'acct_burst';
/** The local default concurrency: fifty concurrent requests fit under it. */
const open = e2eStack({ name: 'burst', apiKeys: { [API_KEY]: ACCOUNT } });
/**
 * Four invocations in flight per function at most, so that a burst goes past the cap with a handful of requests.
 * The requests that hold the cap must still be running when the burst has gone through the authorizer, and end
 * within the integration timeout (processor 6 s, warehouse and mailer 1 s each < functions 10 s, + 1 s <= lease
 * 11 s; the API waits 9 s).
 */
const CAP = 4;
const HOLD_MS = 5_000;
const capped = e2eStack({
  name: 'burst-cap',
  apiKeys: { [API_KEY]: ACCOUNT },
  settings: {
    IDEMPOTENCY_LEASE_SECONDS: '11',
    API_FUNCTION_TIMEOUT_MS: '10000',
    CONSUMER_FUNCTION_TIMEOUT_MS: '10000',
    PROCESSOR_TIMEOUT_MS: '6000',
    WAREHOUSE_TIMEOUT_MS: '1000',
    MAILER_TIMEOUT_MS: '1000',
    COMPLETER_INTERVAL_SECONDS: '2',
    LOCAL_FUNCTION_CONCURRENCY: String(CAP),
  },
});

const BURST = 50;
const card = { amount: 1999, currency: 'usd', source: 'tok_visa', description: 'Burst' };
const widgets = {
  items: [{ sku: 'sku_widget', quantity: 1 }],
  amount: 1999,
  currency: 'usd',
  source: 'tok_visa',
  email: 'buyer@example.com',
};

interface Answer {
  readonly status: number;
  readonly retryAfter: string | null;
  readonly contentType: string | null;
  readonly body: Record<string, unknown>;
}

async function post(url: string, path: '/payments' | '/orders', key: string, body: unknown): Promise<Answer> {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${API_KEY}`, 'Content-Type': 'application/json', 'Idempotency-Key': key },
    body: JSON.stringify(body),
  });
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    contentType: response.headers.get('content-type'),
    body: (await response.json()) as Record<string, unknown>,
  };
}

/** Every answer is a 201, or a 409 that says when to come back. */
function expectOnly201And409(answers: readonly Answer[]): void {
  const others = answers.filter((answer) => answer.status !== 201 && answer.status !== 409);
  expect(others).toEqual([]);
  for (const answer of answers.filter(({ status }) => status === 409))
    expect(Number(answer.retryAfter)).toBeGreaterThan(0);
}

function chargesFor(stack: E2eStack, clientKey: string): Charge[] {
  return stack.sandbox.charges().filter((charge) => charge.metadata.operation_key?.endsWith(`|${clientKey}`));
}

/** What a client does with a 409 or a 429: waits as told, then asks again (bounded). */
async function untilAnswered(send: () => Promise<Answer>, attempts = 30): Promise<Answer> {
  for (let attempt = 1; ; attempt++) {
    const answer = await send();
    if (answer.retryAfter === null || attempt === attempts) return answer;
    await new Promise((resolve) => setTimeout(resolve, Number(answer.retryAfter) * 1000));
  }
}

describe.each(FRONT_DOORS)('fifty concurrent requests through %s', (_, urlOf) => {
  it('answer fifty distinct payments with fifty 201s, one charge each', async () => {
    const keys = Array.from({ length: BURST }, () => randomUUID());
    const answers = await Promise.all(keys.map((key) => post(urlOf(open), '/payments', key, card)));
    expect(answers.map(({ status }) => status)).toEqual(keys.map(() => 201));
    for (const [index, key] of keys.entries()) {
      expect(chargesFor(open, key).map((charge) => charge.id)).toEqual([answers[index]!.body.charge_id]);
    }
  });

  it('answer fifty duplicates of one payment with 201 and 409 only, and charge once', async () => {
    const key = randomUUID();
    const answers = await Promise.all(Array.from({ length: BURST }, () => post(urlOf(open), '/payments', key, card)));
    expectOnly201And409(answers);
    const payments = new Set(answers.filter(({ status }) => status === 201).map(({ body }) => body.id));
    expect(payments.size).toBeLessThanOrEqual(1);
    const final = await untilAnswered(() => post(urlOf(open), '/payments', key, card));
    expect(final.status).toBe(201);
    expect(chargesFor(open, key).map((charge) => charge.id)).toEqual([final.body.charge_id]);
  });

  it('answer fifty duplicates of one order with 201 and 409 only, and charge once', async () => {
    const key = randomUUID();
    const answers = await Promise.all(Array.from({ length: BURST }, () => post(urlOf(open), '/orders', key, widgets)));
    expectOnly201And409(answers);
    const orders = new Set(answers.filter(({ status }) => status === 201).map(({ body }) => body.id));
    expect(orders.size).toBeLessThanOrEqual(1);
    const final = await untilAnswered(() => post(urlOf(open), '/orders', key, widgets));
    expect(final.status).toBe(201);
    expect(chargesFor(open, key)).toHaveLength(1);
  });
});

/** The cap's worth of payments at once, each charged and then answered `ms` later; resolves with their answers. */
async function holdTheCap(ms: number): Promise<{ keys: string[]; answers: Promise<Answer[]> }> {
  await fetch(`${capped.sandbox.url}/__faults`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ mode: 'delay_after_charge', ms, count: CAP }),
  });
  const keys = Array.from({ length: CAP }, () => randomUUID());
  const answers = Promise.all(keys.map((key) => post(capped.url, '/payments', key, card)));
  // Answered before every one was charged: say how, rather than wait for charges that will not come.
  const answeredEarly = answers.then((all) => {
    throw new Error(`answered before the cap was held: ${all.map(({ status }) => status).join(', ')}`);
  });
  answeredEarly.catch(() => undefined);
  await Promise.race([
    eventually(
      () => keys.filter((key) => chargesFor(capped, key).length === 1).length,
      (charged) => charged === CAP,
    ),
    answeredEarly,
  ]);
  return { keys, answers };
}

describe('a burst past a function’s concurrency limit', () => {
  beforeAll(async () => {
    // Every environment the payments function may have, started: the requests that hold them below run at once.
    await (await holdTheCap(2_000)).answers;
  });

  it('is throttled: 429 with Retry-After through the REST API, 500 through the HTTP API; nothing is charged twice', async () => {
    // The cap's worth of payments hold every environment the function may have: each is charged, then the
    // processor takes five seconds to answer.
    const { keys: holding, answers: held } = await holdTheCap(HOLD_MS);

    // Past the cap, through either front door (the authorizer has environments to spare: these are all it runs).
    const past = Array.from({ length: CAP }, () => randomUUID());
    const doors = past.map((_, index) => (index % 2 === 0 ? capped.url : capped.httpApiUrl));
    const throttled = await Promise.all(past.map((key, index) => post(doors[index]!, '/payments', key, card)));
    for (const [index, answer] of throttled.entries()) {
      if (doors[index] === capped.url) {
        expect(answer).toMatchObject({ status: 429, contentType: 'application/problem+json' });
        expect(answer.body).toMatchObject({ status: 429, title: 'Too Many Requests' });
        expect(Number(answer.retryAfter)).toBeGreaterThan(0);
      } else {
        expect(answer).toMatchObject({ status: 500, body: { message: 'Internal Server Error' } });
      }
    }
    // A throttled invocation never ran: nothing was charged for it.
    for (const key of past) expect(chargesFor(capped, key)).toEqual([]);

    // The held ones finish; the throttled ones, retried, are charged once each.
    expect((await held).map(({ status }) => status)).toEqual(holding.map(() => 201));
    for (const [index, key] of past.entries()) {
      const retried = await untilAnswered(() => post(doors[index]!, '/payments', key, card));
      expect(retried.status).toBe(201);
      expect(chargesFor(capped, key).map((charge) => charge.id)).toEqual([retried.body.charge_id]);
    }
  });

  it('gives the places of environments killed mid-payment back: their retries are charged once, never throttled', async () => {
    const { keys, answers: first } = await holdTheCap(HOLD_MS);
    // Every environment of the payments function dies mid-invocation, as a crashed Lambda sandbox does.
    const environments = descendantEnvironments(capped.process.pid).filter(
      ({ env }) => env.AWS_LAMBDA_FUNCTION_NAME === 'payments-create',
    );
    expect(environments).toHaveLength(CAP);
    for (const { pid } of environments) process.kill(pid, 'SIGKILL');
    // A function error: API Gateway's 502.
    expect((await first).map(({ status }) => status)).toEqual(keys.map(() => 502));

    // The cap's worth of retries at once: none is throttled (a killed environment gave its place back); each waits
    // out its dead owner's lease (409) and is answered from its one charge.
    const retried = await Promise.all(
      keys.map(async (key) => {
        const statuses: number[] = [];
        const answer = await untilAnswered(async () => {
          const sent = await post(capped.url, '/payments', key, card);
          statuses.push(sent.status);
          return sent;
        });
        return { key, answer, statuses };
      }),
    );
    for (const { key, answer, statuses } of retried) {
      expect(statuses.filter((status) => status !== 409 && status !== 201)).toEqual([]);
      expect(answer.status).toBe(201);
      expect(chargesFor(capped, key).map((charge) => charge.id)).toEqual([answer.body.charge_id]);
    }
  });
});
