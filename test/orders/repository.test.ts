import { randomUUID } from 'node:crypto';
import { EffectConditionFailedError } from 'keystone-idempotency/engine';
import type { Order } from '../../lib/orders/schema';
import { type OrdersSubject, ordersSubjects } from '../support/orders';

/**
 * The orders repository on both databases, its writes committed as the engine commits them (staged effects with a
 * key's completion), so every condition is checked by the database itself.
 */
const subjects = ordersSubjects();

const response = { statusCode: 201, headers: {}, body: '{}' };

describe.each(['dynamodb', 'postgres'] as const)('the orders repository on %s', (kind) => {
  let subject: OrdersSubject;
  let sku: string;
  beforeAll(() => {
    subject = subjects[kind]();
  });
  beforeEach(async () => {
    sku = `sku_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    await subject.orders.seedStock(sku, 10);
  });

  /** Commits effects the way a step or a completion does: with a key's completion, in one transaction. */
  async function commit(effects: unknown[]): Promise<void> {
    const claimed = await subject.store.claim(`test#${randomUUID()}`, 'fp');
    if (claimed.kind !== 'acquired') throw new Error(`claim: ${claimed.kind}`);
    await subject.store.commit(claimed.lease, response, effects);
  }
  const order = (quantity: number, id = `ord_${randomUUID().replaceAll('-', '').slice(0, 24)}`): Order => ({
    id,
    status: 'pending',
    items: [{ sku, quantity }],
    amount: 4200,
    currency: 'usd',
    email: 'buyer@example.com',
    charge_id: null,
    shipment_id: null,
    email_id: null,
    created_at: '2026-12-02T10:00:00.000Z',
  });

  it('seeds stock once: a second seed leaves the counts alone', async () => {
    await subject.orders.seedStock(sku, 99);
    expect(await subject.orders.getInventory(sku)).toEqual({ sku, available: 10, reserved: 0 });
    expect(await subject.orders.getInventory('sku_never_seeded')).toBeUndefined();
  });

  it('reserves: the pending order, its reservation done, and the units moved from available to reserved', async () => {
    const pending = order(3);
    await commit(subject.orders.reserve('acct_1', pending, 'op-key'));

    expect(await subject.orders.getInventory(sku)).toEqual({ sku, available: 7, reserved: 3 });
    expect(await subject.orders.getOrder('acct_1', pending.id)).toEqual({
      ...pending,
      steps: [
        { name: 'reserve', state: 'completed', ref: null },
        { name: 'charge', state: 'pending', ref: null },
        { name: 'ship', state: 'pending', ref: null },
        { name: 'notify', state: 'pending', ref: null },
      ],
    });
  });

  it('shows an order to its own account only', async () => {
    const pending = order(1);
    await commit(subject.orders.reserve('acct_1', pending, 'op-key'));
    expect(await subject.orders.getOrder('acct_2', pending.id)).toBeUndefined();
  });

  it('refuses a second reservation of one order, and moves no stock for it', async () => {
    const pending = order(2);
    await commit(subject.orders.reserve('acct_1', pending, 'op-key'));
    await expect(commit(subject.orders.reserve('acct_1', pending, 'op-key'))).rejects.toThrow(
      EffectConditionFailedError,
    );
    expect(await subject.orders.getInventory(sku)).toEqual({ sku, available: 8, reserved: 2 });
  });

  it('never reserves more than is available: the commit fails and writes nothing', async () => {
    const tooBig = order(11);
    expect(await subject.orders.shortages(tooBig.items)).toEqual([{ sku, requested: 11, available: 10 }]);
    await expect(commit(subject.orders.reserve('acct_1', tooBig, 'op-key'))).rejects.toThrow(
      EffectConditionFailedError,
    );
    expect(await subject.orders.getInventory(sku)).toEqual({ sku, available: 10, reserved: 0 });
    expect(await subject.orders.getOrder('acct_1', tooBig.id)).toBeUndefined();
  });

  it('counts a SKU it has never heard of as none available', async () => {
    expect(await subject.orders.shortages([{ sku: 'sku_nowhere', quantity: 1 }])).toEqual([
      { sku: 'sku_nowhere', requested: 1, available: 0 },
    ]);
  });

  it('checkpoints steps and completes the order once', async () => {
    const pending = order(1);
    await commit(subject.orders.reserve('acct_1', pending, 'op-key'));
    await commit([subject.orders.markStep('acct_1', pending.id, 'charge', 'ch_1')]);
    expect((await subject.orders.getOrder('acct_1', pending.id))?.steps[1]).toEqual({
      name: 'charge',
      state: 'completed',
      ref: 'ch_1',
    });

    const outcome = { status: 'confirmed', charge_id: 'ch_1', shipment_id: 'shp_1', email_id: 'em_1' } as const;
    await commit([subject.orders.complete('acct_1', pending.id, outcome)]);
    await expect(commit([subject.orders.complete('acct_1', pending.id, outcome)])).rejects.toThrow(
      EffectConditionFailedError,
    );
    expect(await subject.orders.getOrder('acct_1', pending.id)).toMatchObject({
      status: 'confirmed',
      charge_id: 'ch_1',
      shipment_id: 'shp_1',
      email_id: 'em_1',
      steps: [
        { name: 'reserve', state: 'completed', ref: null },
        { name: 'charge', state: 'completed', ref: 'ch_1' },
        { name: 'ship', state: 'completed', ref: 'shp_1' },
        { name: 'notify', state: 'completed', ref: 'em_1' },
      ],
    });
  });

  it('releases a reservation once: the units go back to available', async () => {
    const pending = order(4);
    await commit(subject.orders.reserve('acct_1', pending, 'op-key'));
    await commit(subject.orders.release('acct_1', pending.id, pending.items));
    expect(await subject.orders.getInventory(sku)).toEqual({ sku, available: 10, reserved: 0 });
    await expect(commit(subject.orders.release('acct_1', pending.id, pending.items))).rejects.toThrow(
      EffectConditionFailedError,
    );
    expect(await subject.orders.getInventory(sku)).toEqual({ sku, available: 10, reserved: 0 });
  });

  it('completes a declined order with every step saying what happened: released, refused, skipped, skipped', async () => {
    const pending = order(2);
    await commit(subject.orders.reserve('acct_1', pending, 'op-key'));
    const declined = { status: 'declined', charge_id: null, shipment_id: null, email_id: null } as const;
    await commit([
      ...subject.orders.release('acct_1', pending.id, pending.items),
      subject.orders.complete('acct_1', pending.id, declined),
    ]);
    expect(await subject.orders.getOrder('acct_1', pending.id)).toEqual({
      ...pending,
      status: 'declined',
      steps: [
        { name: 'reserve', state: 'released', ref: null },
        { name: 'charge', state: 'refused', ref: null },
        { name: 'ship', state: 'skipped', ref: null },
        { name: 'notify', state: 'skipped', ref: null },
      ],
    });
  });

  it('confirms an order whose confirmation the mailer refused: paid and shipped, its notify step refused', async () => {
    const pending = order(1);
    await commit(subject.orders.reserve('acct_1', pending, 'op-key'));
    const outcome = { status: 'confirmed', charge_id: 'ch_1', shipment_id: 'shp_1', email_id: null } as const;
    await commit([subject.orders.complete('acct_1', pending.id, outcome)]);
    expect((await subject.orders.getOrder('acct_1', pending.id))?.steps).toEqual([
      { name: 'reserve', state: 'completed', ref: null },
      { name: 'charge', state: 'completed', ref: 'ch_1' },
      { name: 'ship', state: 'completed', ref: 'shp_1' },
      { name: 'notify', state: 'refused', ref: null },
    ]);
  });

  it('ends an order refused after its charge: the compensations marked, the refused step, the rest skipped, once', async () => {
    const pending = order(3);
    await commit(subject.orders.reserve('acct_1', pending, 'op-key'));
    await commit([subject.orders.markStep('acct_1', pending.id, 'charge', 'ch_1')]);
    // The compensations, each in its own commit as the engine runs them: the refund, then the stock given back.
    await commit([subject.orders.markStep('acct_1', pending.id, 'charge', 're_1', 'refunded')]);
    await commit([
      ...subject.orders.release('acct_1', pending.id, pending.items),
      subject.orders.markStep('acct_1', pending.id, 'reserve', null, 'released'),
    ]);
    const refusal = { step: 'ship', charge_id: 'ch_1', shipment_id: null } as const;
    await commit([subject.orders.refuse('acct_1', pending.id, refusal)]);

    expect(await subject.orders.getOrder('acct_1', pending.id)).toEqual({
      ...pending,
      status: 'refused',
      charge_id: 'ch_1',
      steps: [
        { name: 'reserve', state: 'released', ref: null },
        { name: 'charge', state: 'refunded', ref: 're_1' },
        { name: 'ship', state: 'refused', ref: null },
        { name: 'notify', state: 'skipped', ref: null },
      ],
    });
    expect(await subject.orders.getInventory(sku)).toEqual({ sku, available: 10, reserved: 0 });
    // Only a pending order ends: a second end, refused or completed, cancels its commit.
    await expect(commit([subject.orders.refuse('acct_1', pending.id, refusal)])).rejects.toThrow(
      EffectConditionFailedError,
    );
    const confirmed = { status: 'confirmed', charge_id: 'ch_1', shipment_id: 'shp_1', email_id: 'em_1' } as const;
    await expect(commit([subject.orders.complete('acct_1', pending.id, confirmed)])).rejects.toThrow(
      EffectConditionFailedError,
    );
    expect((await subject.orders.getOrder('acct_1', pending.id))?.status).toBe('refused');
  });

  it('refuses the last step without touching the ones done before it', async () => {
    const pending = order(1);
    await commit(subject.orders.reserve('acct_1', pending, 'op-key'));
    await commit([subject.orders.markStep('acct_1', pending.id, 'ship', 'shp_1')]);
    await commit([
      subject.orders.refuse('acct_1', pending.id, { step: 'notify', charge_id: 'ch_1', shipment_id: 'shp_1' }),
    ]);
    expect(await subject.orders.getOrder('acct_1', pending.id)).toMatchObject({
      status: 'refused',
      shipment_id: 'shp_1',
      steps: [
        { name: 'reserve', state: 'completed', ref: null },
        { name: 'charge', state: 'pending', ref: null },
        { name: 'ship', state: 'completed', ref: 'shp_1' },
        { name: 'notify', state: 'refused', ref: null },
      ],
    });
  });
});
