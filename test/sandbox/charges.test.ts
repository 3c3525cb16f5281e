import type { Charge } from '../../lib/sandbox/charges';
import { type Sandbox, startSandbox } from '../../lib/sandbox/processor';
import { eventually, getJson, injectFault, newKey, postCharge, postJson, visaCharge } from './client';

describe('sandbox charges', () => {
  let sandbox: Sandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ clock: () => 1_700_000_000_500 });
  });
  afterAll(() => sandbox.close());

  const chargesUnder = async (key: string) =>
    (await getJson<Charge[]>(`${sandbox.url}/charges`)).filter((charge) => charge.idempotency_key === key);

  it('listens on 127.0.0.1 only', () => {
    expect(sandbox.url).toBe(`http://127.0.0.1:${sandbox.port}`);
  });

  it('creates a charge and lists it under its key', async () => {
    const key = newKey();
    const response = await postCharge<Charge>(sandbox, key, { ...visaCharge, currency: 'EUR' });

    expect(response).toMatchObject({ status: 201, replayed: false });
    expect(response.body).toEqual({
      id: expect.stringMatching(/^ch_\w+$/),
      object: 'charge',
      amount: 1999,
      currency: 'eur',
      source: 'tok_visa',
      description: null,
      status: 'succeeded',
      metadata: { order: 'o-1' },
      idempotency_key: key,
      created: 1_700_000_000,
    });
    expect(await chargesUnder(key)).toEqual([response.body]);
  });

  it('replays the same charge for the same key and body, whatever the key order', async () => {
    const key = newKey();
    const first = await postCharge<Charge>(sandbox, key, visaCharge);
    const reordered = { metadata: visaCharge.metadata, source: 'tok_visa', currency: 'eur', amount: 1999 };
    const second = await postCharge<Charge>(sandbox, key, reordered);

    expect(second).toEqual({ status: 201, replayed: true, body: first.body });
    expect(await chargesUnder(key)).toHaveLength(1);
  });

  it('refuses the same key with a different body, and charges nothing more', async () => {
    const key = newKey();
    await postCharge(sandbox, key, visaCharge);
    const conflicting = await postCharge(sandbox, key, { ...visaCharge, amount: 2000 });

    expect(conflicting.status).toBe(400);
    expect(conflicting.body).toMatchObject({ error: { type: 'idempotency_error' } });
    expect(await chargesUnder(key)).toHaveLength(1);
  });

  it('declines tok_chargeDeclined with a 402, remembers the decline, and lists no charge', async () => {
    const key = newKey();
    const declined = { ...visaCharge, source: 'tok_chargeDeclined' };
    const first = await postCharge(sandbox, key, declined);
    const second = await postCharge(sandbox, key, declined);

    expect(first).toEqual({
      status: 402,
      replayed: false,
      body: { error: { type: 'card_error', code: 'card_declined', message: expect.any(String) } },
    });
    expect(second).toEqual({ ...first, replayed: true });
    expect(await chargesUnder(key)).toEqual([]);
  });

  it('charges once for 50 concurrent requests with one key, all answered with that charge', async () => {
    const key = newKey();
    // Hold the first request in flight long enough for the other 49 to arrive while it is still working.
    await injectFault(sandbox, { mode: 'delay', ms: 300 });
    const responses = await Promise.all(Array.from({ length: 50 }, () => postCharge<Charge>(sandbox, key)));

    const charges = await chargesUnder(key);
    expect(charges).toHaveLength(1);
    expect(responses.every((response) => response.status === 201 && response.body.id === charges[0]?.id)).toBe(true);
    expect(responses.filter((response) => !response.replayed)).toHaveLength(1);
  });

  it('keeps the description a charge was made with', async () => {
    const response = await postCharge<Charge>(sandbox, newKey(), { ...visaCharge, description: 'Order 42' });
    expect(response.body.description).toBe('Order 42');
  });

  describe('GET /v1/charges?idempotency_key=', () => {
    const lookUp = (key: string) => fetch(`${sandbox.url}/v1/charges?idempotency_key=${encodeURIComponent(key)}`);

    it('finds the charge made under a key, for a client that lost the answer', async () => {
      const key = newKey();
      const charge = (await postCharge<Charge>(sandbox, key)).body;
      const found = await lookUp(key);
      expect(found.status).toBe(200);
      expect(await found.json()).toEqual({ object: 'list', data: [charge] });
    });

    it('finds nothing under a key that made no charge: unused, declined or failed', async () => {
      const declined = newKey();
      await postCharge(sandbox, declined, { ...visaCharge, source: 'tok_chargeDeclined' });
      const failed = newKey();
      await injectFault(sandbox, { mode: 'error_503' });
      expect((await postCharge(sandbox, failed)).status).toBe(503);
      for (const key of [newKey(), declined, failed]) {
        expect(await (await lookUp(key)).json()).toEqual({ object: 'list', data: [] });
      }
    });

    it('answers 409 while the first request with the key is still working, then the charge', async () => {
      const key = newKey();
      await injectFault(sandbox, { mode: 'delay', ms: 3000 });
      const charging = postCharge<Charge>(sandbox, key);
      // The delay was drawn: the first request holds the key, for 3 s (a window, not a race with the request).
      await eventually(async () => expect(await getJson(`${sandbox.url}/__faults`)).toEqual([]));
      const during = await lookUp(key);
      expect(during.status).toBe(409);
      expect(await during.json()).toMatchObject({
        error: { type: 'idempotency_error', code: 'idempotency_key_in_use' },
      });
      const charge = (await charging).body;
      expect(await (await lookUp(key)).json()).toEqual({ object: 'list', data: [charge] });
    });

    it('refuses a lookup without a key', async () => {
      expect((await fetch(`${sandbox.url}/v1/charges`)).status).toBe(400);
    });
  });

  it('makes one charge per distinct key', async () => {
    const keys = [newKey(), newKey()];
    const [a, b] = await Promise.all(keys.map((key) => postCharge<Charge>(sandbox, key)));
    expect(a?.body.id).not.toBe(b?.body.id);
  });

  describe('refuses a request it cannot act on with a 400', () => {
    it.each([
      // [case, headers, body, the parameter named (Stripe names the first one that fails its check)]
      ['no Idempotency-Key', {}, visaCharge, undefined],
      ['an empty Idempotency-Key', { 'Idempotency-Key': ' ' }, visaCharge, undefined],
      ['an Idempotency-Key over 255 characters', { 'Idempotency-Key': 'k'.repeat(256) }, visaCharge, undefined],
      ['a body that is not JSON', { 'Idempotency-Key': 'bad-json' }, '{"amount":', undefined],
      ['a body that is not an object', { 'Idempotency-Key': 'bad-type' }, [1, 2], undefined],
      ['a zero amount', { 'Idempotency-Key': 'bad-amount' }, { ...visaCharge, amount: 0 }, 'amount'],
      ['a fractional amount', { 'Idempotency-Key': 'bad-fraction' }, { ...visaCharge, amount: 10.5 }, 'amount'],
      [
        'a four-letter currency',
        { 'Idempotency-Key': 'bad-currency' },
        { ...visaCharge, currency: 'euro' },
        'currency',
      ],
      ['no source', { 'Idempotency-Key': 'bad-source' }, { amount: 100, currency: 'eur' }, 'source'],
      ['non-string metadata', { 'Idempotency-Key': 'bad-meta' }, { ...visaCharge, metadata: { n: 1 } }, 'metadata.n'],
      ['an unknown field', { 'Idempotency-Key': 'bad-field' }, { ...visaCharge, capture: false }, undefined],
    ])('with %s', async (_case, headers, body, param) => {
      const response = await postJson(`${sandbox.url}/v1/charges`, body, headers);
      expect(response).toEqual({
        status: 400,
        replayed: false,
        body: { error: { type: 'invalid_request_error', message: expect.any(String), ...(param ? { param } : {}) } },
      });
    });

    it('with an unknown test token, as Stripe does: No such token, naming source', async () => {
      const response = await postCharge(sandbox, newKey(), { ...visaCharge, source: 'tok_nonsense' });
      expect(response).toEqual({
        status: 400,
        replayed: false,
        body: {
          error: {
            type: 'invalid_request_error',
            code: 'resource_missing',
            message: "No such token: 'tok_nonsense'",
            param: 'source',
          },
        },
      });
    });

    it('and does not remember the key, so a corrected request goes through', async () => {
      const key = newKey();
      expect((await postCharge(sandbox, key, { ...visaCharge, amount: -5 })).status).toBe(400);
      expect(await postCharge(sandbox, key, visaCharge)).toMatchObject({ status: 201, replayed: false });
    });
  });

  it('answers an unknown route with a 404', async () => {
    const response = await fetch(`${sandbox.url}/v1/refunds`);
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ error: { type: 'invalid_request_error' } });
  });
});
