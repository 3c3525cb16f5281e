import { randomUUID } from 'node:crypto';
import type { OpenAPIObject } from 'openapi3-ts/oas31';
import type { Charge } from '../../lib/sandbox/charges';
import { getJson, injectFault } from '../sandbox/client';
import { e2eStack, FRONT_DOORS } from '../support/e2e-stack';
import { eventually } from '../support/eventually';
import { OpenApiContract } from '../support/openapi-contract';

/**
 * The payments flows through both front doors of one local stack (`bin/local.ts`, what `npm start` runs): the REST
 * API (payload 1.0, the TOKEN authorizer) and the HTTP API (payload 2.0, the REQUEST authorizer with simple
 * responses), as `api: 'rest'` and `api: 'http'` deploy them. The same functions and the same store answer both:
 * every flow must end the same way through either, with the processor's ledger as the witness for money moved, and
 * every answer a function gives checked against the OpenAPI document. Only the gateways' own errors differ.
 *
 * Timings (the shared rules hold): processor 4 s < functions 5 s, functions + the 1 s margin <= lease 6 s; completer
 * every second. A payment whose client never came back is recorded a lease after its last attempt, by the completer
 * (the sandbox sends no webhooks here): waits are on state, with generous backstops.
 */
jest.setTimeout(120_000);

const KEY_A = 'sk_test_doors_a';
const KEY_B = 'sk_test_doors_b';
const e2e = e2eStack({
  name: 'doors',
  apiKeys: { [KEY_A]: 'acct_doors_a', [KEY_B]: 'acct_doors_b' },
  settings: {
    IDEMPOTENCY_LEASE_SECONDS: '6',
    API_FUNCTION_TIMEOUT_MS: '5000',
    CONSUMER_FUNCTION_TIMEOUT_MS: '5000',
    PROCESSOR_TIMEOUT_MS: '4000',
    SETTLEMENT_VISIBILITY_SECONDS: '12',
    COMPLETER_INTERVAL_SECONDS: '1',
  },
});
let contract: OpenApiContract;

beforeAll(async () => {
  contract = new OpenApiContract((await (await fetch(`${e2e.url}/openapi.json`)).json()) as OpenAPIObject);
});

const card = { amount: 4200, currency: 'usd', source: 'tok_visa', description: 'Order 42' };

interface Payment {
  id: string;
  charge_id: string;
  status: string;
}

/** `POST /payments` through one front door, checked against the contract. */
async function pay(url: string, key: string, options: { body?: unknown; apiKey?: string } = {}) {
  const response = await fetch(`${url}/payments`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${options.apiKey ?? KEY_A}`,
      'Content-Type': 'application/json',
      'Idempotency-Key': key,
    },
    body: JSON.stringify(options.body ?? card),
  });
  await contract.check('POST /payments', response);
  return response;
}

async function getPayment(url: string, id: string, apiKey = KEY_A) {
  const response = await fetch(`${url}/payments/${id}`, { headers: { Authorization: `Bearer ${apiKey}` } });
  await contract.check('GET /payments/{id}', response);
  return response;
}

/** The charges the processor made under one client key: the witness for money moved for that operation. */
function chargesFor(clientKey: string): Charge[] {
  return e2e.sandbox.charges().filter((charge) => charge.metadata.operation_key?.endsWith(`|${clientKey}`));
}

/** A 201 whose payment is backed by exactly one charge, the one it names. */
async function expectOneCharge(response: Response, clientKey: string): Promise<Payment> {
  expect(response.status).toBe(201);
  const payment = (await response.clone().json()) as Payment;
  expect(chargesFor(clientKey).map((charge) => charge.id)).toEqual([payment.charge_id]);
  return payment;
}

describe.each(FRONT_DOORS)('the payments flows through %s', (_door, urlOf) => {
  it('replays the first answer byte for byte, with Idempotent-Replayed, and charges once', async () => {
    const key = randomUUID();
    const first = await pay(urlOf(e2e), key);
    const payment = await expectOneCharge(first, key);
    const again = await pay(urlOf(e2e), key);
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('location')).toBe(`/payments/${payment.id}`);
    expect(await again.text()).toBe(await first.text());
    expect((await getPayment(urlOf(e2e), payment.id)).status).toBe(200);
    expect((await getPayment(urlOf(e2e), payment.id, KEY_B)).status).toBe(404);
    expect(chargesFor(key)).toHaveLength(1);
  });

  it('answers the key reused with another body 422 idempotency-key-reused, and charges nothing more', async () => {
    const key = randomUUID();
    await expectOneCharge(await pay(urlOf(e2e), key), key);
    const changed = await pay(urlOf(e2e), key, { body: { ...card, amount: 4300 } });
    expect(changed.status).toBe(422);
    expect(await changed.json()).toMatchObject({
      type: 'https://keystone-idempotency.dev/problems/idempotency-key-reused',
    });
    expect(chargesFor(key)).toHaveLength(1);
  });

  it('answers a duplicate while the original runs 409 with Retry-After, then replays the original', async () => {
    const key = randomUUID();
    await injectFault(e2e.sandbox, { mode: 'delay', ms: 3000, count: 1 });
    const original = pay(urlOf(e2e), key);
    // The processor drew the delay: it holds the original's charge, so the original holds the key.
    await eventually(
      () => getJson<unknown[]>(`${e2e.sandbox.url}/__faults`),
      (pending) => pending.length === 0,
    );
    const duplicate = await pay(urlOf(e2e), key);
    expect(duplicate.status).toBe(409);
    expect(duplicate.headers.get('retry-after')).toBeTruthy();
    expect(await duplicate.json()).toMatchObject({
      type: 'https://keystone-idempotency.dev/problems/request-in-flight',
    });
    const first = await original;
    await expectOneCharge(first, key);
    const replay = await pay(urlOf(e2e), key);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.text()).toBe(await first.text());
  });

  it('answers a processor outage 503 with Retry-After, and the retry with the same key charges once', async () => {
    const key = randomUUID();
    await injectFault(e2e.sandbox, { mode: 'error_503', count: 1 });
    const outage = await pay(urlOf(e2e), key);
    expect(outage.status).toBe(503);
    expect(outage.headers.get('retry-after')).toBeTruthy();
    expect(outage.headers.get('content-type')).toBe('application/problem+json');
    expect(chargesFor(key)).toHaveLength(0);
    await expectOneCharge(await pay(urlOf(e2e), key), key);
  });

  it('answers 502 when the processor charged and its reply was lost, and the retry gets that very charge', async () => {
    const key = randomUUID();
    await injectFault(e2e.sandbox, { mode: 'drop_after_charge', count: 1 });
    const lost = await pay(urlOf(e2e), key);
    expect(lost.status).toBe(502);
    expect(lost.headers.get('retry-after')).toBeTruthy();
    const [charged] = chargesFor(key);
    const payment = await expectOneCharge(await pay(urlOf(e2e), key), key);
    expect(payment.charge_id).toBe(charged?.id);
  });

  it('stores a decline (402) and a value the processor refuses (422), and replays each', async () => {
    for (const [source, status] of [
      ['tok_chargeDeclined', 402],
      ['tok_unknown_card', 422],
    ] as const) {
      const key = randomUUID();
      const first = await pay(urlOf(e2e), key, { body: { ...card, source } });
      expect(first.status).toBe(status);
      const replay = await pay(urlOf(e2e), key, { body: { ...card, source } });
      expect(replay.status).toBe(status);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(await replay.text()).toBe(await first.text());
      expect(chargesFor(key)).toHaveLength(0);
    }
  });

  it('records a payment whose client never came back, and replays it to the client that comes back late', async () => {
    const key = randomUUID();
    await injectFault(e2e.sandbox, { mode: 'drop_after_charge', count: 1 });
    expect((await pay(urlOf(e2e), key)).status).toBe(502);
    // The client gives up. The completer finds the charge under the operation's downstream key and records it.
    const [charge] = chargesFor(key);
    const paymentId = charge?.metadata.payment_id as string;
    await eventually(
      async () => (await getPayment(urlOf(e2e), paymentId)).status,
      (status) => status === 200,
      60_000,
    );
    const late = await pay(urlOf(e2e), key);
    expect(late.headers.get('idempotent-replayed')).toBe('true');
    expect(late.headers.get('location')).toBe(`/payments/${paymentId}`);
    const payment = await expectOneCharge(late, key);
    expect(payment).toMatchObject({ id: paymentId, charge_id: charge?.id, status: 'succeeded' });
  });

  it('answers an invalid body 400 listing each problem, and leaves the key free', async () => {
    const key = randomUUID();
    const bad = await pay(urlOf(e2e), key, { body: { amount: 0, currency: 'usdollars', source: '', tip: 1 } });
    expect(bad.status).toBe(400);
    const problem = (await bad.json()) as { errors: { path: string }[] };
    expect(problem.errors.map((error) => error.path).sort()).toEqual(['', 'amount', 'currency', 'source']);
    await expectOneCharge(await pay(urlOf(e2e), key), key);
  });
});

describe('the two front doors of one stack', () => {
  it('are one API: a key sent through one replays through the other, with one charge', async () => {
    const [restKey, httpKey] = [randomUUID(), randomUUID()];
    const viaRest = await pay(e2e.url, restKey);
    const viaHttp = await pay(e2e.httpApiUrl, httpKey);
    const crossedToHttp = await pay(e2e.httpApiUrl, restKey);
    const crossedToRest = await pay(e2e.url, httpKey);
    for (const [original, crossed, key] of [
      [viaRest, crossedToHttp, restKey],
      [viaHttp, crossedToRest, httpKey],
    ] as const) {
      await expectOneCharge(original, key);
      expect(crossed.status).toBe(201);
      expect(crossed.headers.get('idempotent-replayed')).toBe('true');
      expect(await crossed.text()).toBe(await original.text());
    }
  });

  it('answer their own errors their own way: the REST API as problem+json, the HTTP API as {"message"}', async () => {
    const missing = { method: 'POST', body: JSON.stringify(card) };
    const unknown = { ...missing, headers: { Authorization: 'Bearer sk_test_nobody', 'Idempotency-Key': 'k-1' } };
    const rest = [await fetch(`${e2e.url}/payments`, missing), await fetch(`${e2e.url}/payments`, unknown)];
    const http = [
      await fetch(`${e2e.httpApiUrl}/payments`, missing),
      await fetch(`${e2e.httpApiUrl}/payments`, unknown),
    ];

    expect(rest.map((response) => response.status)).toEqual([401, 401]);
    for (const response of rest) {
      await contract.check('POST /payments', response);
      expect(response.headers.get('content-type')).toBe('application/problem+json');
      expect(await response.json()).toMatchObject({ type: 'about:blank', title: 'Unauthorized' });
    }
    expect(http.map((response) => response.status)).toEqual([401, 403]);
    expect(http.map((response) => response.headers.get('content-type'))).toEqual([
      'application/json',
      'application/json',
    ]);
    expect(await http[0]?.json()).toEqual({ message: 'Unauthorized' });
    expect(await http[1]?.json()).toEqual({ message: 'Forbidden' });
    const [notFound, wrongMethod] = [
      await fetch(`${e2e.httpApiUrl}/nowhere`),
      await fetch(`${e2e.httpApiUrl}/payments`, { method: 'PUT' }),
    ];
    expect([notFound.status, wrongMethod.status]).toEqual([404, 404]);
    expect(await wrongMethod.json()).toEqual({ message: 'Not Found' });
  });
});
