import { randomUUID } from 'node:crypto';
import { type Attempt, IdempotencyProblemType } from 'keystone-idempotency/client';
import { PaymentProblemType, type PaymentResult, PaymentsClient } from '../../lib/payments/client';
import type { Charge } from '../../lib/sandbox/processor';
import { getJson, injectFault } from '../sandbox/client';
import { e2eStack } from '../support/e2e-stack';

/**
 * The payments client (lib/payments/client, on the library's retry-safe client) against the local stack
 * (`bin/local.ts`, the handler code Lambda runs) and the sandbox processor, with the processor's faults. The
 * processor's GET /charges is the witness: whatever the client saw, the card must have been charged exactly once.
 */
jest.setTimeout(60_000);

const API_KEY = 'sk_test_e2e_client';
const e2e = e2eStack({
  name: 'e2e-client',
  apiKeys: { [API_KEY]: 'acct_client' },
  settings: { PROCESSOR_TIMEOUT_MS: '5000' },
});
let chargesBefore: number;
beforeEach(async () => {
  chargesBefore = (await allCharges()).length;
});

const card = { amount: 4200, currency: 'usd', source: 'tok_visa' };

function client(retry: { maxAttempts?: number } = {}) {
  return new PaymentsClient({ baseUrl: e2e.url, apiKey: API_KEY, retry });
}

function allCharges(): Promise<Charge[]> {
  return getJson<Charge[]>(`${e2e.sandbox.url}/charges`);
}

/**
 * A success, and the processor's ledger holding exactly one new charge since the test began: the one it names.
 * Counting the whole ledger, not only the payment's own charges, is what catches a client that sends a retry under
 * a new key (that makes a second payment, with a second charge, behind the first one's back).
 */
async function expectOneChargeBehind(result: PaymentResult) {
  if (result.kind !== 'success') throw new Error(`expected a success, got ${JSON.stringify(result)}`);
  const newCharges = (await allCharges()).slice(chargesBefore);
  expect(newCharges.map((charge) => charge.id)).toEqual([result.body.charge_id]);
  expect(newCharges[0]?.metadata.payment_id).toBe(result.body.id);
}

const statuses = (attempts: readonly Attempt[]) =>
  attempts.map((attempt) => (attempt.kind === 'response' ? attempt.status : attempt.error));

describe('PaymentsClient against the local stack', () => {
  it('heals a processor reply lost after the charge with its own retry: 201, and one charge', async () => {
    await injectFault(e2e.sandbox, { mode: 'drop_after_charge', count: 1 });
    const result = await client().preparePayment(card).send();
    expect(statuses(result.attempts)).toEqual([502, 201]);
    expect(result.attempts[0]).toMatchObject({ retryAfter: '1', problemType: PaymentProblemType.processorUnavailable });
    expect(result.attempts[1]?.waitedMs).toBeGreaterThanOrEqual(990); // Retry-After: 1 (a timer may round down a ms)
    expect(result).toMatchObject({ kind: 'success', status: 201, replayed: false });
    await expectOneChargeBehind(result);
  });

  it('turns a double send during a 2-second processor call into one charge: 409s, then the replay', async () => {
    await injectFault(e2e.sandbox, { mode: 'delay', ms: 2000, count: 1 });
    const payment = client({ maxAttempts: 10 }).preparePayment(card);
    const results = await Promise.all([payment.send(), payment.send()]);
    const original = results.find((result) => result.attempts.length === 1);
    const duplicate = results.find((result) => result !== original);
    expect(original).toMatchObject({ kind: 'success', status: 201, replayed: false });
    expect(duplicate).toMatchObject({ kind: 'success', status: 201, replayed: true });
    const seen = statuses(duplicate?.attempts ?? []);
    expect(seen.at(-1)).toBe(201);
    expect(seen.slice(0, -1).length).toBeGreaterThanOrEqual(1);
    expect(new Set(seen.slice(0, -1))).toEqual(new Set([409]));
    for (const attempt of duplicate?.attempts.slice(0, -1) ?? []) {
      expect(attempt).toMatchObject({ retryAfter: '1', problemType: IdempotencyProblemType.requestInFlight });
    }
    if (original?.kind !== 'success' || duplicate?.kind !== 'success') throw new Error('both must succeed');
    expect(duplicate.body).toEqual(original.body);
    await expectOneChargeBehind(original);
  });

  it('retries through two 503s to one charge', async () => {
    await injectFault(e2e.sandbox, { mode: 'error_503', count: 2 });
    const result = await client().preparePayment(card).send();
    expect(statuses(result.attempts)).toEqual([503, 503, 201]);
    expect(result).toMatchObject({ kind: 'success', replayed: false });
    await expectOneChargeBehind(result);
  });

  it('returns a decline at once, as a 402 card-declined problem, without retrying', async () => {
    const result = await client()
      .preparePayment({ ...card, source: 'tok_chargeDeclined' })
      .send();
    expect(result).toMatchObject({ kind: 'problem', status: 402, retryable: false });
    if (result.kind === 'problem') expect(result.problem.type).toBe(PaymentProblemType.cardDeclined);
    expect(result.attempts).toHaveLength(1);
    expect((await allCharges()).length).toBe(chargesBefore);
  });

  it('continues an operation from a persisted key: the second send is the replay of the first', async () => {
    const stored = { key: `order-${randomUUID()}`, body: card };
    const first = await client().preparePayment(stored.body, { idempotencyKey: stored.key }).send();
    // A reload: a new client, the key read back from storage.
    const resumed = await client().preparePayment(stored.body, { idempotencyKey: stored.key }).send();
    expect(resumed).toMatchObject({ kind: 'success', replayed: true });
    if (first.kind !== 'success' || resumed.kind !== 'success') throw new Error('both must succeed');
    expect(resumed.body).toEqual(first.body);
    await expectOneChargeBehind(first);
  });
});
