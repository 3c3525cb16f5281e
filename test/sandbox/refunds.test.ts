import type { Charge } from '../../lib/sandbox/charges';
import type { PendingFault } from '../../lib/sandbox/faults';
import { type Refund, type Sandbox, startSandbox } from '../../lib/sandbox/processor';
import { eventually, getJson, injectFault, newKey, postCharge, postJson, visaCharge } from './client';

describe('sandbox refunds', () => {
  let sandbox: Sandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ clock: () => 1_700_000_000_500 });
  });
  afterEach(() => fetch(`${sandbox.url}/__faults`, { method: 'DELETE' }));
  afterAll(() => sandbox.close());

  const charge = async (body: Record<string, unknown> = visaCharge) =>
    (await postCharge<Charge>(sandbox, newKey(), body)).body;
  const refund = <T = Refund>(key: string, body: Record<string, unknown>, signal?: AbortSignal) =>
    postJson<T>(`${sandbox.url}/v1/refunds`, body, { 'Idempotency-Key': key }, signal);
  const refundsOf = async (chargeId: string) =>
    (await getJson<Refund[]>(`${sandbox.url}/refunds`)).filter((given) => given.charge === chargeId);

  it('gives back what is left of a charge under a key, lists it, and replays it for the same key', async () => {
    const charged = await charge();
    const key = newKey('refund');
    const first = await refund(key, { charge: charged.id });

    expect(first).toEqual({
      status: 201,
      replayed: false,
      body: {
        id: expect.stringMatching(/^re_[0-9a-f]{24}$/),
        object: 'refund',
        charge: charged.id,
        amount: 1999,
        currency: 'eur',
        status: 'succeeded',
        metadata: {},
        idempotency_key: key,
        created: 1_700_000_000,
      },
    });
    expect(await refund(key, { charge: charged.id })).toEqual({ ...first, replayed: true });
    expect(await refundsOf(charged.id)).toEqual([first.body]);
    expect(sandbox.refunds()).toContainEqual(first.body);
  });

  it('refunds part of a charge, then the rest, then refuses a third under a new key: nothing more given back', async () => {
    const charged = await charge();
    expect((await refund(newKey(), { charge: charged.id, amount: 500 })).status).toBe(201);
    const rest = await refund(newKey(), { charge: charged.id });
    expect(rest).toMatchObject({ status: 201, body: { amount: 1499 } });

    const again = await refund(newKey(), { charge: charged.id });
    expect(again).toEqual({
      status: 400,
      replayed: false,
      body: {
        error: {
          type: 'invalid_request_error',
          code: 'charge_already_refunded',
          message: `Charge ${charged.id} has already been refunded.`,
        },
      },
    });
    expect((await refundsOf(charged.id)).map((given) => given.amount)).toEqual([500, 1499]);
  });

  it('refuses more than is left of the charge, naming the amount, and refunds nothing', async () => {
    const charged = await charge();
    const over = await refund(newKey(), { charge: charged.id, amount: 2000 });
    expect(over).toMatchObject({
      status: 400,
      body: { error: { type: 'invalid_request_error', code: 'amount_too_large', param: 'amount' } },
    });
    expect(await refundsOf(charged.id)).toEqual([]);
  });

  it('refuses a charge it does not know (a declined card made none), and remembers the refusal under the key', async () => {
    const key = newKey();
    const unknown = await refund(key, { charge: 'ch_000000000000000000000000' });
    expect(unknown).toEqual({
      status: 400,
      replayed: false,
      body: {
        error: {
          type: 'invalid_request_error',
          code: 'resource_missing',
          message: "No such charge: 'ch_000000000000000000000000'",
          param: 'charge',
        },
      },
    });
    expect(await refund(key, { charge: 'ch_000000000000000000000000' })).toEqual({ ...unknown, replayed: true });
  });

  it.each([
    ['no charge', {}],
    ['a zero amount', { charge: 'ch_x', amount: 0 }],
    ['a fractional amount', { charge: 'ch_x', amount: 1.5 }],
    ['an unknown field', { charge: 'ch_x', reason: 'fraudulent' }],
  ])('refuses a body with %s with a 400 that names the parameter', async (_case, body) => {
    const response = await refund(newKey(), body);
    expect(response).toMatchObject({ status: 400, body: { error: { type: 'invalid_request_error' } } });
  });

  it('refuses a refund without a key, and one that reuses a key with another body', async () => {
    const charged = await charge();
    expect((await postJson(`${sandbox.url}/v1/refunds`, { charge: charged.id })).status).toBe(400);
    const key = newKey();
    await refund(key, { charge: charged.id, amount: 100 });
    const reused = await refund(key, { charge: charged.id, amount: 200 });
    expect(reused).toMatchObject({ status: 400, body: { error: { type: 'idempotency_error' } } });
    expect((await refundsOf(charged.id)).map((given) => given.amount)).toEqual([100]);
  });

  it('gives a charge back once when ten refunds under ten keys race, and once for ten duplicates of one key', async () => {
    const raced = await charge();
    const keys = await Promise.all(Array.from({ length: 10 }, () => refund(newKey(), { charge: raced.id })));
    expect(keys.map((response) => response.status).sort()).toEqual([201, ...Array(9).fill(400)]);
    expect(await refundsOf(raced.id)).toHaveLength(1);

    const duplicated = await charge();
    const key = newKey();
    const copies = await Promise.all(Array.from({ length: 10 }, () => refund(key, { charge: duplicated.id })));
    expect(new Set(copies.map((copy) => copy.body.id)).size).toBe(1);
    expect(await refundsOf(duplicated.id)).toHaveLength(1);
  });

  describe('faults aimed at refunds', () => {
    it('error_503 refunds nothing, and a retry with the key refunds once', async () => {
      const charged = await charge();
      const key = newKey();
      await injectFault(sandbox, { mode: 'error_503', target: 'refunds' });
      expect(await refund(key, { charge: charged.id })).toMatchObject({
        status: 503,
        body: { error: { type: 'api_error' } },
      });
      expect(await refundsOf(charged.id)).toEqual([]);
      expect((await refund(key, { charge: charged.id })).status).toBe(201);
      expect(await refundsOf(charged.id)).toHaveLength(1);
    });

    it('delay refunds after the client hung up; the retry with the key replays that refund', async () => {
      const charged = await charge();
      const key = newKey();
      await injectFault(sandbox, { mode: 'delay', ms: 400, target: 'refunds' });
      await expect(refund(key, { charge: charged.id }, AbortSignal.timeout(100))).rejects.toThrow(/aborted/i);
      await eventually(async () => expect(await refundsOf(charged.id)).toHaveLength(1));
      const retry = await refund(key, { charge: charged.id });
      expect(retry).toMatchObject({ status: 201, replayed: true });
      expect(await refundsOf(charged.id)).toEqual([retry.body]);
    });

    it('drop_after_charge refunds, then hangs up; the retry with the key replays that refund', async () => {
      const charged = await charge();
      const key = newKey();
      await injectFault(sandbox, { mode: 'drop_after_charge', target: 'refunds' });
      await expect(refund(key, { charge: charged.id })).rejects.toThrow();
      expect(await refundsOf(charged.id)).toHaveLength(1);
      expect(await refund(key, { charge: charged.id })).toMatchObject({ status: 201, replayed: true });
      expect(await refundsOf(charged.id)).toHaveLength(1);
    });

    it('an outage answers every refund 503 for its time, and leaves charges alone', async () => {
      const charged = await charge();
      await injectFault(sandbox, { mode: 'outage', ms: 60_000, target: 'refunds' });
      expect((await refund(newKey(), { charge: charged.id })).status).toBe(503);
      expect((await refund(newKey(), { charge: charged.id })).status).toBe(503);
      expect((await postCharge(sandbox, newKey())).status).toBe(201);
      expect(await refundsOf(charged.id)).toEqual([]);
      expect(await getJson<PendingFault[]>(`${sandbox.url}/__faults`)).toEqual([
        expect.objectContaining({ mode: 'outage', target: 'refunds' }),
      ]);
    });
  });
});
