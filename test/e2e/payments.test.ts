import { randomUUID } from 'node:crypto';
import type { OpenAPIObject } from 'openapi3-ts/oas31';
import { openApiDocument } from '../../lib/openapi/document';
import { MAX_AMOUNT } from '../../lib/payments/schema';
import { getJson, injectFault } from '../sandbox/client';
import { e2eStack } from '../support/e2e-stack';
import { eventually } from '../support/eventually';
import { OpenApiContract } from '../support/openapi-contract';

/**
 * The payments service end to end: HTTP into the local stack process (`bin/local.ts`, the handler code Lambda runs),
 * DynamoDB Local from the jest setup, and the sandbox processor, whose GET /charges is the witness for money moved.
 * Every response the API gives is checked against the OpenAPI document the stack serves: status, headers, body.
 */
jest.setTimeout(60_000);

const KEY_A = 'sk_test_e2e_account_a';
const KEY_B = 'sk_test_e2e_account_b';
const API_KEYS = { [KEY_A]: 'acct_a', [KEY_B]: 'acct_b' };
// A short processor timeout, so the timeout path (504) is quick to provoke.
const e2e = e2eStack({ name: 'e2e', apiKeys: API_KEYS, settings: { PROCESSOR_TIMEOUT_MS: '1500' } });
let contract: OpenApiContract;

beforeAll(async () => {
  contract = new OpenApiContract((await (await fetch(`${e2e.url}/openapi.json`)).json()) as OpenAPIObject);
});

const card = { amount: 4200, currency: 'usd', source: 'tok_visa' };

async function pay(
  options: { key?: string; body?: unknown; apiKey?: string; url?: string; contentType?: string } = {},
) {
  const headers: Record<string, string> = {
    Authorization: `Bearer ${options.apiKey ?? KEY_A}`,
    'Content-Type': options.contentType ?? 'application/json',
  };
  if (options.key !== undefined) headers['Idempotency-Key'] = options.key;
  const body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body ?? card);
  const response = await fetch(`${options.url ?? e2e.url}/payments`, { method: 'POST', headers, body });
  await contract.check('POST /payments', response);
  return response;
}

async function getPayment(id: string, apiKey = KEY_A) {
  const response = await fetch(`${e2e.url}/payments/${id}`, { headers: { Authorization: `Bearer ${apiKey}` } });
  await contract.check('GET /payments/{id}', response);
  return response;
}

async function allCharges() {
  return (await (await fetch(`${e2e.sandbox.url}/charges`)).json()) as { id: string; idempotency_key: string }[];
}

/** Charges whose metadata names this payment: the witness for one operation. */
async function chargesFor(paymentId: string, processorUrl = e2e.sandbox.url) {
  const all = (await (await fetch(`${processorUrl}/charges`)).json()) as { metadata: { payment_id: string } }[];
  return all.filter((c) => c.metadata.payment_id === paymentId);
}

/** A retry that succeeded, and the processor's ledger showing exactly the one charge it names. */
async function expectOneChargeBehind(retry: Response, processorUrl = e2e.sandbox.url) {
  expect(retry.status).toBe(201);
  const payment = (await retry.json()) as { id: string; charge_id: string };
  const charges = (await chargesFor(payment.id, processorUrl)) as unknown as { id: string }[];
  expect(charges.map((charge) => charge.id)).toEqual([payment.charge_id]);
}

/** What a client does with a 409: wait as told, then ask again (bounded). */
async function payUntilAnswered(options: Parameters<typeof pay>[0], attempts = 20): Promise<Response> {
  for (let attempt = 1; ; attempt++) {
    const response = await pay(options);
    if (response.status !== 409 || attempt === attempts) return response;
    await new Promise((resolve) => setTimeout(resolve, Number(response.headers.get('retry-after') ?? 1) * 1000));
  }
}

async function fault(body: unknown) {
  const response = await fetch(`${e2e.sandbox.url}/__faults`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(response.ok).toBe(true);
}

describe('POST /payments over the local stack', () => {
  it('turns 50 concurrent identical requests into one charge and one payment', async () => {
    const key = randomUUID();
    const before = (await allCharges()).length;
    const responses = await Promise.all(Array.from({ length: 50 }, () => pay({ key })));
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 201).length).toBeGreaterThanOrEqual(1);
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    const bodies = await Promise.all(responses.filter((r) => r.status === 201).map((r) => r.json()));
    expect(new Set(bodies.map((b) => (b as { id: string }).id)).size).toBe(1);
    expect((await allCharges()).length - before).toBe(1);
    const paymentId = (bodies[0] as { id: string }).id;
    const get = await getPayment(paymentId);
    expect(get.status).toBe(200);
  });

  it('answers a retry after the processor dropped the connection with the one charge it made', async () => {
    const key = randomUUID();
    await fault({ mode: 'drop_after_charge', count: 1 });
    const first = await pay({ key });
    expect(first.status).toBe(502);
    expect(first.headers.get('retry-after')).toBeTruthy();
    await expectOneChargeBehind(await pay({ key }));
  });

  it('answers 504 when the processor times out, and the retry finds the charge it made meanwhile', async () => {
    const key = randomUUID();
    const before = (await allCharges()).length;
    await fault({ mode: 'delay', ms: 2500, count: 1 });
    const first = await pay({ key });
    expect(first.status).toBe(504);
    expect(first.headers.get('retry-after')).toBeTruthy();
    // The processor finishes the charge regardless; the retry comes once it has.
    await eventually(
      async () => (await allCharges()).length,
      (count) => count === before + 1,
    );
    await expectOneChargeBehind(await pay({ key }));
  });

  it('succeeds on a retry after a 503, with one charge', async () => {
    const key = randomUUID();
    await fault({ mode: 'error_503', count: 1 });
    const first = await pay({ key });
    expect(first.status).toBe(503);
    expect(first.headers.get('content-type')).toBe('application/problem+json');
    await expectOneChargeBehind(await pay({ key }));
  });

  it('replays a reordered but equal body and rejects a changed one with 422', async () => {
    const key = randomUUID();
    const first = await pay({ key, body: '{"amount":4200,"currency":"usd","source":"tok_visa"}' });
    const reordered = await pay({ key, body: '{ "source": "tok_visa", "currency": "usd", "amount": 4200 }' });
    expect(reordered.status).toBe(201);
    expect(reordered.headers.get('idempotent-replayed')).toBe('true');
    expect(await reordered.text()).toBe(await first.text());
    const changed = await pay({ key, body: { ...card, amount: 4300 } });
    expect(changed.status).toBe(422);
    expect(changed.headers.get('content-type')).toBe('application/problem+json');
  });

  it('rejects an invalid body with 400, listing each problem, and leaves the key usable', async () => {
    const key = randomUUID();
    const bad = await pay({ key, body: { amount: 0, currency: 'usdollars', source: '', tip: 1 } });
    expect(bad.status).toBe(400);
    const problem = (await bad.json()) as { errors: { path: string }[] };
    expect(problem.errors.map((e) => e.path).sort()).toEqual(['', 'amount', 'currency', 'source']);
    expect((await pay({ key, body: 'not json' })).status).toBe(400);
    expect((await pay({ key })).status).toBe(201);
  });

  it('refuses text the settlement pipeline could not carry with 400 naming the field, and charges nothing', async () => {
    const before = (await allCharges()).length;
    for (const description of ['Order 42 \uFFFF', 'Order \uD800 42']) {
      const refused = await pay({ key: randomUUID(), body: { ...card, description } });
      expect(refused.status).toBe(400);
      expect(await refused.json()).toMatchObject({
        type: 'https://keystone-idempotency.dev/problems/invalid-body',
        errors: [{ path: 'description', message: expect.stringContaining('U+FFFF') }],
      });
    }
    expect((await allCharges()).length).toBe(before);
  });

  it('charges the largest amount it accepts, and answers one more with 400, never a 500', async () => {
    expect((await pay({ key: randomUUID(), body: { ...card, amount: MAX_AMOUNT } })).status).toBe(201);
    const tooMuch = await pay({ key: randomUUID(), body: { ...card, amount: MAX_AMOUNT + 1 } });
    expect(tooMuch.status).toBe(400);
    expect(((await tooMuch.json()) as { errors: { path: string }[] }).errors.map((e) => e.path)).toEqual(['amount']);
  });

  it('refuses a body declared in another charset with 415, and leaves the key free for the UTF-8 one', async () => {
    const key = randomUUID();
    const body = JSON.stringify({ ...card, description: 'Café crème' });
    const latin1 = await pay({ key, body, contentType: 'application/json; charset=latin1' });
    expect(latin1.status).toBe(415);
    expect(await latin1.json()).toMatchObject({
      type: 'https://keystone-idempotency.dev/problems/unsupported-media-type',
      status: 415,
    });
    const utf8 = await pay({ key, body, contentType: 'application/json; charset=utf-8' });
    expect(utf8.status).toBe(201);
    expect(((await utf8.json()) as { description: string }).description).toBe('Café crème');
  });

  it('answers a value the processor refuses (an unknown card token) with 422 naming it, stored: never a 500', async () => {
    const key = randomUUID();
    const before = (await allCharges()).length;
    const rejected = await pay({ key, body: { ...card, source: 'tok_unknown_card' } });
    expect(rejected.status).toBe(422);
    const problem = await rejected.text();
    expect(JSON.parse(problem)).toMatchObject({
      type: 'https://keystone-idempotency.dev/problems/payment-rejected',
      errors: [{ path: 'source', message: "No such token: 'tok_unknown_card'" }],
    });
    const replay = await pay({ key, body: { ...card, source: 'tok_unknown_card' } });
    expect(replay.status).toBe(422);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.text()).toBe(problem);
    expect((await allCharges()).length).toBe(before);
  });

  it('answers 404, never 500, for an id that cannot be a payment (1 KB long) and for an unknown one', async () => {
    const huge = await getPayment(`pay_${'a'.repeat(1020)}`);
    expect(huge.status).toBe(404);
    expect(await huge.json()).toMatchObject({ type: 'https://keystone-idempotency.dev/problems/not-found' });
    expect((await getPayment(`pay_${'0'.repeat(24)}`)).status).toBe(404);
  });

  it('rejects a missing or malformed key with 400', async () => {
    expect((await pay({})).status).toBe(400);
    expect((await pay({ key: 'x'.repeat(256) })).status).toBe(400);
  });

  it('gives account B its own payment and charge under a key account A already used', async () => {
    const key = randomUUID();
    const a = (await (await pay({ key })).json()) as { id: string; charge_id: string };
    const bResponse = await pay({ key, apiKey: KEY_B });
    expect(bResponse.status).toBe(201);
    expect(bResponse.headers.get('idempotent-replayed')).toBeNull();
    const b = (await bResponse.json()) as { id: string; charge_id: string };
    expect(b.id).not.toBe(a.id);
    expect(b.charge_id).not.toBe(a.charge_id);
    const asA = await getPayment(b.id, KEY_A);
    expect(asA.status).toBe(404);
  });

  it('stores a decline and replays it as 402 with Idempotent-Replayed', async () => {
    const key = randomUUID();
    const declined = await pay({ key, body: { ...card, source: 'tok_chargeDeclined' } });
    expect(declined.status).toBe(402);
    const replay = await pay({ key, body: { ...card, source: 'tok_chargeDeclined' } });
    expect(replay.status).toBe(402);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.text()).toBe(await declined.text());
  });

  it('answers 401 problem+json for a missing or unknown API key, as the deployed gateway responses do', async () => {
    const missing = await fetch(`${e2e.url}/payments`, { method: 'POST', body: '{}' });
    await contract.check('POST /payments', missing);
    expect(missing.status).toBe(401);
    expect(missing.headers.get('content-type')).toBe('application/problem+json');
    expect(await missing.json()).toMatchObject({ type: 'about:blank', title: 'Unauthorized' });
    expect((await pay({ key: randomUUID(), apiKey: 'sk_test_unknown' })).status).toBe(401);
  });
});

describe('the OpenAPI document', () => {
  it("is served at /openapi.json, generated from the handlers' schemas, with this stack as its first server", async () => {
    const served = await (await fetch(`${e2e.url}/openapi.json`)).json();
    expect(served).toEqual(openApiDocument({ serverUrl: e2e.url }));
  });
});

describe('a crash during a slow processor call', () => {
  // The lease outlasts the crash and one request to a second, already running container; the shared timing rules
  // hold: processor < function < lease, completer period < lease.
  const leaseMs = 8000;
  const crashes = e2eStack({
    name: 'e2e-crash',
    apiKeys: API_KEYS,
    settings: {
      IDEMPOTENCY_LEASE_SECONDS: String(leaseMs / 1000),
      IDEMPOTENCY_TTL_SECONDS: '60',
      API_FUNCTION_TIMEOUT_MS: '5000',
      CONSUMER_FUNCTION_TIMEOUT_MS: '5000',
      PROCESSOR_TIMEOUT_MS: '4000',
      COMPLETER_INTERVAL_SECONDS: '5',
    },
  });

  it('makes one charge when the API dies mid-call and the client retries after the lease', async () => {
    // The retry goes to another container, as Lambda's would: it is running before the crash, so however slow
    // this machine starts a stack, the dead owner's lease is still live when the retry arrives.
    const twin = await crashes.startTwin();
    try {
      const key = randomUUID();
      await injectFault(crashes.sandbox, { mode: 'delay', ms: 2500, count: 1 });
      const claimedAt = Date.now();
      const doomed = pay({ key, url: crashes.url }).catch((error: unknown) => error);
      // The processor drew the delay: the charge is in flight there, so the key is claimed. Now the API dies.
      await eventually(
        () => getJson<unknown[]>(`${crashes.sandbox.url}/__faults`),
        (pending) => pending.length === 0,
      );
      await crashes.crash();
      expect(String(await doomed)).toMatch(/fetch failed/); // the client saw the connection die

      const during = await pay({ key, url: twin.url });
      expect(during.status).toBe(409); // the dead owner's lease still holds
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, claimedAt + leaseMs + 300 - Date.now())));
      // The client's takeover, or (if it came first) the completer's: either way one charge, and a 201.
      await expectOneChargeBehind(await payUntilAnswered({ key, url: twin.url }), crashes.sandbox.url);
    } finally {
      await twin.stop();
    }
  });
});

describe('a key reused after its expiry', () => {
  const expiring = e2eStack({
    name: 'e2e-expiry',
    apiKeys: API_KEYS,
    settings: {
      // Short clocks the rules accept (functions + the 1 s lease margin <= lease), with room for a loaded machine: a
      // first request timed out at 900 ms stored nothing, and its "replay" was a fresh payment.
      IDEMPOTENCY_LEASE_SECONDS: '4',
      IDEMPOTENCY_TTL_SECONDS: '6',
      API_FUNCTION_TIMEOUT_MS: '2900',
      CONSUMER_FUNCTION_TIMEOUT_MS: '2900',
      PROCESSOR_TIMEOUT_MS: '2000',
      COMPLETER_INTERVAL_SECONDS: '0.5',
    },
  });

  it('is a new payment with a new charge', async () => {
    const key = randomUUID();
    const created = await pay({ key, url: expiring.url });
    expect(created.status).toBe(201);
    const first = (await created.json()) as { id: string; charge_id: string };
    expect((await pay({ key, url: expiring.url })).headers.get('idempotent-replayed')).toBe('true');
    await new Promise((resolve) => setTimeout(resolve, 7100)); // a full TTL after the commit, rounded up
    const later = await pay({ key, url: expiring.url });
    expect(later.status).toBe(201);
    expect(later.headers.get('idempotent-replayed')).toBeNull();
    const second = (await later.json()) as { id: string; charge_id: string };
    expect(second.id).not.toBe(first.id);
    expect(second.charge_id).not.toBe(first.charge_id);
  });
});
