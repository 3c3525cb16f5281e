import type { Charge } from '../../lib/sandbox/charges';
import type { PendingFault } from '../../lib/sandbox/faults';
import { type Sandbox, startSandbox } from '../../lib/sandbox/processor';
import { eventually, getJson, injectFault, newKey, postCharge, postJson } from './client';

describe('sandbox fault injection', () => {
  let sandbox: Sandbox;
  beforeAll(async () => {
    sandbox = await startSandbox();
  });
  afterEach(() => fetch(`${sandbox.url}/__faults`, { method: 'DELETE' }));
  afterAll(() => sandbox.close());

  const chargesUnder = async (key: string) =>
    (await getJson<Charge[]>(`${sandbox.url}/charges`)).filter((charge) => charge.idempotency_key === key);
  const pendingFaults = () => getJson<PendingFault[]>(`${sandbox.url}/__faults`);

  describe('/__faults', () => {
    it('lists pending faults in order of arrival, with defaults applied, and clears them', async () => {
      await injectFault(sandbox, { mode: 'delay', ms: 50, count: 2 });
      await injectFault(sandbox, { mode: 'error_503', target: 'emails' });

      expect(await pendingFaults()).toEqual([
        { mode: 'delay', ms: 50, count: 2, target: 'charges', remaining: 2 },
        { mode: 'error_503', count: 1, target: 'emails', remaining: 1 },
      ]);
      const cleared = await fetch(`${sandbox.url}/__faults`, { method: 'DELETE' });
      expect(cleared.status).toBe(200);
      expect(await pendingFaults()).toEqual([]);
    });

    it.each([
      ['an unknown mode', { mode: 'explode' }],
      ['a delay without ms', { mode: 'delay' }],
      ['a negative delay', { mode: 'delay', ms: -1 }],
      ['a zero count', { mode: 'error_503', count: 0 }],
      ['an unknown target', { mode: 'error_503', target: 'payouts' }],
      ['in_transit aimed at anything but shipments', { mode: 'in_transit', ms: 10, target: 'charges' }],
      ['in_transit without a target', { mode: 'in_transit', ms: 10 }],
      ['an unknown field', { mode: 'drop_after_charge', when: 'later' }],
      ['a body that is not JSON', 'mode=delay'],
    ])('refuses %s with a 400', async (_case, body) => {
      const response = await postJson(`${sandbox.url}/__faults`, body);
      expect(response.status).toBe(400);
      expect(response.body).toMatchObject({ error: { type: 'invalid_request_error' } });
      expect(await pendingFaults()).toEqual([]);
    });
  });

  describe('delay', () => {
    it('makes the charge after the delay even though the client hung up during it', async () => {
      const key = newKey();
      await injectFault(sandbox, { mode: 'delay', ms: 500 });

      const hangUp = AbortSignal.timeout(150);
      await expect(postCharge(sandbox, key, undefined, hangUp)).rejects.toThrow(/aborted/i);
      expect(await chargesUnder(key)).toEqual([]); // the client left while the charge was still pending

      await eventually(async () => expect(await chargesUnder(key)).toHaveLength(1));
      const retry = await postCharge<Charge>(sandbox, key);
      expect(retry).toMatchObject({ status: 201, replayed: true });
      expect(retry.body.id).toBe((await chargesUnder(key))[0]?.id);
    });
  });

  describe('error_503', () => {
    it('answers 503 without charging, and a retry with the same key charges once', async () => {
      const key = newKey();
      await injectFault(sandbox, { mode: 'error_503' });

      const failed = await postCharge(sandbox, key);
      expect(failed).toMatchObject({ status: 503, replayed: false, body: { error: { type: 'api_error' } } });
      expect(await chargesUnder(key)).toEqual([]);

      const retry = await postCharge<Charge>(sandbox, key);
      expect(retry).toMatchObject({ status: 201, replayed: false });
      expect(await chargesUnder(key)).toEqual([retry.body]);
    });

    it('hits as many charge attempts as its count, then no more', async () => {
      await injectFault(sandbox, { mode: 'error_503', count: 2 });
      const statuses = [];
      for (let i = 0; i < 3; i += 1) statuses.push((await postCharge(sandbox, newKey())).status);
      expect(statuses).toEqual([503, 503, 201]);
    });
  });

  describe('drop_after_charge', () => {
    it('charges, hangs up without an answer, and replays that charge to a retry with the same key', async () => {
      const key = newKey();
      await injectFault(sandbox, { mode: 'drop_after_charge' });

      await expect(postCharge(sandbox, key)).rejects.toThrow('fetch failed');
      const charges = await chargesUnder(key);
      expect(charges).toHaveLength(1);

      const retry = await postCharge<Charge>(sandbox, key);
      expect(retry).toEqual({ status: 201, replayed: true, body: charges[0] });
    });
  });

  describe('delay_after_charge', () => {
    it('charges and emits the event at once, and answers only after the delay', async () => {
      const key = newKey();
      await injectFault(sandbox, { mode: 'delay_after_charge', ms: 3000 });
      const started = Date.now();
      let answered = false;
      const answer = postCharge<Charge>(sandbox, key).finally(() => {
        answered = true;
      });
      await eventually(async () => expect(await chargesUnder(key)).toHaveLength(1));
      // The charge (and its event) exist while the answer is still held: an order, not a stopwatch.
      expect(answered).toBe(false);
      const charged = await answer;
      expect(Date.now() - started).toBeGreaterThanOrEqual(3000);
      expect(charged).toMatchObject({ status: 201, replayed: false });
      expect(sandbox.events().some((event) => event.data.object.id === charged.body.id)).toBe(true);
    });
  });

  it('applies faults in order of arrival', async () => {
    await injectFault(sandbox, { mode: 'error_503' });
    await injectFault(sandbox, { mode: 'drop_after_charge' });

    expect((await postCharge(sandbox, newKey())).status).toBe(503);
    await expect(postCharge(sandbox, newKey())).rejects.toThrow('fetch failed');
    expect((await postCharge(sandbox, newKey())).status).toBe(201);
  });

  it('spends no fault on a replay: a fault lands only on an attempt to charge', async () => {
    const key = newKey();
    await postCharge(sandbox, key);
    await injectFault(sandbox, { mode: 'error_503' });

    expect(await postCharge(sandbox, key)).toMatchObject({ status: 201, replayed: true });
    expect(await pendingFaults()).toEqual([expect.objectContaining({ mode: 'error_503', remaining: 1 })]);
  });

  it('cancels a pending delay on close instead of waiting it out', async () => {
    const closing = await startSandbox();
    await injectFault(closing, { mode: 'delay', ms: 20_000 });
    const parked = postCharge(closing, newKey());
    await eventually(async () => expect(await getJson(`${closing.url}/__faults`)).toEqual([]));

    const started = Date.now();
    await closing.close();
    expect(Date.now() - started).toBeLessThan(10_000); // well short of the 20 s delay, however slow the machine
    await expect(parked).rejects.toThrow('fetch failed');
    expect(closing.charges()).toEqual([]);
  });

  it('leaves charges alone with a fault aimed at emails', async () => {
    await injectFault(sandbox, { mode: 'error_503', target: 'emails' });
    expect((await postCharge(sandbox, newKey())).status).toBe(201);
    expect(await pendingFaults()).toHaveLength(1);
  });
});
