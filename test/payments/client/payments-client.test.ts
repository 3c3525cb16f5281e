import { problemType } from 'keystone-idempotency/http';
import { PaymentProblemType, type PaymentResult, PaymentsClient, readPayment } from '../../../lib/payments/client';
import { PROBLEM_TYPE_BASE, PaymentProblemType as ServerProblemType } from '../../../lib/payments/problems';
import { idempotencyKeys, problem, type Step, scriptedFetch } from '../../support/scripted-fetch';

/**
 * The payments API's client: the library's retry-safe client pointed at POST /payments with the account's key, and
 * a 2xx read as a payment. The retry rules themselves are the library's (test/client); here, what the payments
 * client adds, against a scripted fetch.
 */
const card = { amount: 4200, currency: 'usd', source: 'tok_visa' } as const;
const payment = {
  id: 'pay_0123456789abcdef01234567',
  amount: 4200,
  currency: 'usd',
  source: 'tok_visa',
  description: null,
  status: 'succeeded',
  charge_id: 'ch_1',
  created_at: '2026-01-01T00:00:00.000Z',
  settled_at: null,
};

function clientFor(steps: readonly Step[], baseUrl = 'http://127.0.0.1:3000') {
  const scripted = scriptedFetch(steps);
  const client = new PaymentsClient({ baseUrl, apiKey: 'sk_test_unit', fetch: scripted.fetch });
  return { client, requests: scripted.requests };
}

const created = (body: unknown = payment) => Response.json(body, { status: 201 });

async function sendOne(steps: readonly Step[]): Promise<PaymentResult> {
  return clientFor(steps).client.preparePayment(card).send();
}

describe('PaymentsClient', () => {
  describe('preparePayment', () => {
    it('fixes a generated key before anything is sent, and keeps the body', () => {
      const { client, requests } = clientFor([]);
      const operation = client.preparePayment(card);
      expect(operation.idempotencyKey).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(client.preparePayment(card).idempotencyKey).not.toBe(operation.idempotencyKey);
      expect(operation.body).toEqual(card);
      expect(requests).toHaveLength(0);
    });

    it("sends the caller's own key, and refuses one the server would refuse", async () => {
      const { client, requests } = clientFor([created()]);
      await client.preparePayment(card, { idempotencyKey: 'order-42' }).send();
      expect(idempotencyKeys(requests)).toEqual(['order-42']);
      expect(() => client.preparePayment(card, { idempotencyKey: 'order 42' })).toThrow(TypeError);
    });
  });

  describe('send', () => {
    it('posts the payment to /payments with the API key, and returns the payment', async () => {
      const { client, requests } = clientFor([created()]);
      const result = await client.preparePayment(card).send();
      expect(result).toMatchObject({ kind: 'success', status: 201, body: payment, replayed: false });
      const [request] = requests;
      expect(request?.method).toBe('POST');
      expect(request?.url).toBe('http://127.0.0.1:3000/payments');
      expect(request?.headers.get('authorization')).toBe('Bearer sk_test_unit');
      expect(await request?.json()).toEqual(card);
    });

    it("keeps the base URL's path, as a deployed stage's URL has one", async () => {
      const { client, requests } = clientFor([created()], 'https://api.example.com/prod');
      await client.preparePayment(card).send();
      expect(requests[0]?.url).toBe('https://api.example.com/prod/payments');
    });

    it('retries a processor outage under the same key, as the library client does', async () => {
      const outage = problem(503, PaymentProblemType.processorUnavailable, { 'Retry-After': '0' });
      const { client, requests } = clientFor([outage, created()]);
      expect(await client.preparePayment(card).send()).toMatchObject({ kind: 'success', body: payment });
      expect(new Set(idempotencyKeys(requests)).size).toBe(1);
      expect(requests).toHaveLength(2);
    });

    it('returns a decline at once, as its problem', async () => {
      const declined = problem(402, PaymentProblemType.cardDeclined, {}, { decline_code: 'insufficient_funds' });
      const result = await sendOne([declined]);
      expect(result).toMatchObject({ kind: 'problem', status: 402, retryable: false });
      if (result.kind === 'problem') expect(result.problem.decline_code).toBe('insufficient_funds');
    });
  });

  describe('what counts as a payment', () => {
    it('takes a payment with a field a newer server added, and drops the field', async () => {
      const result = await sendOne([created({ ...payment, risk_score: 3 })]);
      expect(result).toMatchObject({ kind: 'success', body: payment });
      if (result.kind === 'success') expect(result.body).not.toHaveProperty('risk_score');
    });

    it.each([
      ['null', null],
      ['an array', [payment]],
      ['a payment without its id', { ...payment, id: undefined }],
      ['a payment with an unknown status', { ...payment, status: 'maybe' }],
      ['a payment whose amount is a string', { ...payment, amount: '4200' }],
    ])('refuses %s as an invalid response', async (_name, body) => {
      expect(await sendOne([created(body)])).toMatchObject({ kind: 'invalid-response', reason: 'rejected' });
    });

    it('names what is wrong', () => {
      expect(() => readPayment({ ...payment, id: 7, status: 'maybe' })).toThrow(/^not a payment: id: .*; status: /);
      expect(() => readPayment(null)).toThrow('not a payment: the body: Invalid input (expected object)');
    });
  });

  describe('options', () => {
    it('refuses a missing API key, and a policy that cannot work', () => {
      const base = { baseUrl: 'http://127.0.0.1:3000', apiKey: 'sk_test' };
      expect(() => new PaymentsClient({ ...base, apiKey: '' })).toThrow(TypeError);
      expect(() => new PaymentsClient({ ...base, retry: { maxAttempts: 0 } })).toThrow(RangeError);
    });
  });
});

describe('PaymentProblemType', () => {
  it("names the server's payment problems a client gets, as the full type URI a response carries", () => {
    for (const [name, uri] of Object.entries(PaymentProblemType)) {
      expect(uri).toBe(problemType(ServerProblemType[name as keyof typeof ServerProblemType], PROBLEM_TYPE_BASE));
    }
    // The orders API's and the processor's own, which no client of the payments API is answered.
    const others = Object.keys(ServerProblemType).filter((name) => !(name in PaymentProblemType));
    expect(others).toEqual([
      'insufficientStock',
      'stockContended',
      'warehouseUnavailable',
      'shipmentRefused',
      'mailerUnavailable',
      'invalidSignature',
    ]);
  });
});
