import { randomUUID } from 'node:crypto';
import { DynamoDbStore } from 'keystone-idempotency/dynamodb';
import type { Lease } from 'keystone-idempotency/engine';
import { scopedKey } from 'keystone-idempotency/engine';
import { chargeReference, paymentCreated, paymentFromCharge } from '../../lib/payments/payment';
import { type Charge, ProcessorClient } from '../../lib/payments/processor-client';
import { chargeLookup, completeFromCharge, recoverPayments } from '../../lib/payments/recovery';
import { PaymentsStore } from '../../lib/payments/store';
import { type Sandbox, startSandbox } from '../../lib/sandbox/processor';
import { testDatabase } from '../support/dynamodb';
import { FakeClock } from '../support/fake-clock';

/**
 * Payments recovery against DynamoDB Local and the sandbox processor: every branch of what a witness (the event) or
 * the completer does with an operation whose client never came back.
 */
const db = testDatabase();
const ACCOUNT = 'acct_rec';
const LEASE_MS = 20_000;
let sandbox: Sandbox;
let processor: ProcessorClient;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
  processor = new ProcessorClient({ baseUrl: sandbox.url, timeoutMs: 2000 });
});
afterAll(() => sandbox?.close());

function deps(clock = new FakeClock(Date.now())) {
  const store = new DynamoDbStore({
    client: db.doc,
    tableName: db.idempotencyTable,
    clock,
    leaseSeconds: LEASE_MS / 1000,
  });
  return { store, payments: new PaymentsStore(db.doc, db.paymentsTable), clock };
}

async function claimRecoverable(store: DynamoDbStore): Promise<Lease> {
  const key = scopedKey({ accountId: ACCOUNT, operation: 'POST /payments', key: randomUUID() });
  const claimed = await store.claim(key, 'fp', { recoverable: true });
  if (claimed.kind !== 'acquired') throw new Error(`expected to acquire, got ${claimed.kind}`);
  return claimed.lease;
}

/** The handler's charge, under the lease's downstream key, with the operation's reference in its metadata. */
async function chargeUnder(lease: Lease, source = 'tok_visa'): Promise<Charge | undefined> {
  const outcome = await processor.charge(
    {
      amount: 1234,
      currency: 'eur',
      source,
      description: 'Recovery',
      metadata: { ...chargeReference(ACCOUNT, lease.key, lease.downstreamKey) },
    },
    lease.downstreamKey,
  );
  return outcome.kind === 'charged' ? outcome.charge : undefined;
}

/** What the handler does up to the charge: claim (recoverable), then charge under the downstream key. */
async function claimAndCharge(store: DynamoDbStore, source = 'tok_visa'): Promise<{ lease: Lease; charge?: Charge }> {
  const lease = await claimRecoverable(store);
  const charge = await chargeUnder(lease, source);
  return { lease, ...(charge ? { charge } : {}) };
}

describe('completeFromCharge (the event path)', () => {
  it('completes a released operation: the payment row and the exact 201 the handler would have stored', async () => {
    const { store, payments } = deps();
    const { lease, charge } = await claimAndCharge(store);
    await store.release(lease);
    expect(await completeFromCharge({ store, payments }, charge!)).toEqual({ kind: 'completed' });
    const paymentId = charge!.metadata.payment_id!;
    const payment = await payments.getPayment(ACCOUNT, paymentId);
    expect(payment).toMatchObject({
      id: paymentId,
      charge_id: charge!.id,
      status: 'succeeded',
      description: 'Recovery',
    });
    const replay = await store.claim(lease.key, 'fp');
    expect(replay).toMatchObject({ kind: 'replay', response: paymentCreated(paymentFromCharge(charge!, paymentId)) });
  });

  it('leaves a live owner alone, saying how long its lease has left', async () => {
    const clock = new FakeClock(Date.now());
    const { store, payments } = deps(clock);
    const { charge } = await claimAndCharge(store);
    clock.advance(5000);
    expect(await completeFromCharge({ store, payments }, charge!)).toEqual({
      kind: 'owner-live',
      retryAfterMs: LEASE_MS - 5000,
    });
    expect(await payments.getPayment(ACCOUNT, charge!.metadata.payment_id!)).toBeUndefined();
  });

  it('takes over an owner whose lease ran out, and fences it out: its late commit writes nothing', async () => {
    const clock = new FakeClock(Date.now());
    const { store, payments } = deps(clock);
    const { lease, charge } = await claimAndCharge(store);
    clock.advance(LEASE_MS);
    expect(await completeFromCharge({ store, payments }, charge!)).toEqual({ kind: 'completed' });
    const paymentId = charge!.metadata.payment_id!;
    const late = paymentsRow(payments, paymentId, charge!, lease);
    await expect(store.commit(lease, paymentCreated(paymentFromCharge(charge!, paymentId)), [late])).rejects.toThrow(
      /no longer held/,
    );
    // Recovery's commit stands: completed under another owner, the row written once, by recovery.
    const record = await store.get(lease.key);
    expect(record).toMatchObject({ status: 'COMPLETED', attempt: 2 });
    expect(record?.leaseToken).not.toBe(lease.leaseToken);
    expect(await payments.getPayment(ACCOUNT, paymentId)).toMatchObject({ charge_id: charge!.id });
  });

  it('gives exactly one of two witnesses at once the completion; the other finds it done or contended', async () => {
    const { store, payments } = deps();
    const { lease, charge } = await claimAndCharge(store);
    await store.release(lease);
    const outcomes = await Promise.all([
      completeFromCharge({ store, payments }, charge!),
      completeFromCharge({ store, payments }, charge!),
    ]);
    expect(outcomes.filter((outcome) => outcome.kind === 'completed')).toHaveLength(1);
    const other = outcomes.find((outcome) => outcome.kind !== 'completed')!;
    expect(['already-completed', 'contended', 'owner-live']).toContain(other.kind);
    expect(await db.itemsUnder(`ACCOUNT#${ACCOUNT}`)).toBeGreaterThan(0);
    const paymentId = charge!.metadata.payment_id!;
    expect(await payments.getPayment(ACCOUNT, paymentId)).toMatchObject({ charge_id: charge!.id });
  });

  it('records the payment on its own when the operation record is gone: money is never left unrecorded', async () => {
    const { store, payments } = deps();
    const charge: Charge = {
      id: `ch_${randomUUID().slice(0, 8)}`,
      amount: 500,
      currency: 'usd',
      source: 'tok_visa',
      status: 'succeeded',
      created: Math.floor(Date.now() / 1000),
      metadata: {
        ...chargeReference(ACCOUNT, `${ACCOUNT}|POST%20%2Fpayments|expired-${randomUUID()}`, `idk_${randomUUID()}`),
      },
    };
    expect(await completeFromCharge({ store, payments }, charge)).toEqual({ kind: 'recorded-without-operation' });
    expect(await payments.getPayment(ACCOUNT, charge.metadata.payment_id!)).toMatchObject({ charge_id: charge.id });
    // Twice is still one row.
    expect(await completeFromCharge({ store, payments }, charge)).toEqual({ kind: 'recorded-without-operation' });
  });

  it('completes nothing for a charge that names no operation (made elsewhere, or before references existed)', async () => {
    const { store, payments } = deps();
    const charge: Charge = {
      id: 'ch_foreign',
      amount: 1,
      currency: 'usd',
      source: 'tok_visa',
      status: 'succeeded',
      created: 0,
      metadata: { payment_id: 'pay_x', account_id: ACCOUNT },
    };
    expect(await completeFromCharge({ store, payments }, charge)).toEqual({ kind: 'untracked' });
  });
});

describe('chargeLookup (what the completer asks the processor)', () => {
  it('completes from the charge made under the downstream key, abandons when there is none', async () => {
    const { store, payments } = deps();
    const resolve = chargeLookup({ store, payments, processor });
    const { lease, charge } = await claimAndCharge(store);
    const verdict = await resolve(lease);
    expect(verdict).toMatchObject({
      kind: 'complete',
      response: paymentCreated(paymentFromCharge(charge!, charge!.metadata.payment_id!)),
    });
    const uncharged = await store.claim(
      scopedKey({ accountId: ACCOUNT, operation: 'POST /payments', key: randomUUID() }),
      'fp',
      { recoverable: true },
    );
    if (uncharged.kind !== 'acquired') throw new Error('expected to acquire');
    expect(await resolve(uncharged.lease)).toEqual({ kind: 'abandon' });
  });

  it('waits (retry) while the processor is still working under the key, and when it cannot be asked', async () => {
    const { store, payments } = deps();
    const lease = await claimRecoverable(store);
    await fetch(`${sandbox.url}/__faults`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ mode: 'delay', ms: 1800 }), // under the client's 2 s timeout
    });
    const charging = chargeUnder(lease);
    // The request drew the delay: it is at the processor, holding the key for 1.8 s (a window, not a race).
    while (((await (await fetch(`${sandbox.url}/__faults`)).json()) as unknown[]).length > 0) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const resolve = chargeLookup({ store, payments, processor });
    expect(await resolve(lease)).toEqual({ kind: 'retry', reason: expect.stringMatching(/still working/) });
    expect(await charging).toBeDefined();
    const unreachable = new ProcessorClient({ baseUrl: 'http://127.0.0.1:9', timeoutMs: 500 });
    expect(await chargeLookup({ store, payments, processor: unreachable })(lease)).toEqual({
      kind: 'retry',
      reason: expect.stringMatching(/could not be asked/),
    });
  });
});

describe('recoverPayments (one completer run)', () => {
  it('completes the due operation that charged and abandons the one that did not, and reports both', async () => {
    const clock = new FakeClock(Date.now());
    const { store, payments } = deps(clock);
    const charged = await claimAndCharge(store);
    const declined = await claimAndCharge(store, 'tok_chargeDeclined');
    expect(declined.charge).toBeUndefined();
    clock.advance(LEASE_MS);
    const report = await recoverPayments({ store, payments, processor }, { limit: 1000 });
    expect(report).toMatchObject({ completed: expect.any(Number), abandoned: expect.any(Number), failed: 0 });
    expect(report.completed).toBeGreaterThanOrEqual(1);
    expect(report.abandoned).toBeGreaterThanOrEqual(1);
    expect(await payments.getPayment(ACCOUNT, charged.charge!.metadata.payment_id!)).toMatchObject({
      charge_id: charged.charge!.id,
    });
    expect((await store.get(declined.lease.key))?.status).toBe('ABANDONED');
    expect((await store.claim(charged.lease.key, 'fp')).kind).toBe('replay');
  });
  it('leaves an operation of another kind due instead of abandoning it, and hands it to its own resolver', async () => {
    const clock = new FakeClock(Date.now());
    const { store, payments } = deps(clock);
    const order = await store.claim(
      scopedKey({ accountId: ACCOUNT, operation: 'POST /orders', key: randomUUID() }),
      'fp',
      { recoverable: true },
    );
    if (order.kind !== 'acquired') throw new Error('expected to acquire');
    clock.advance(LEASE_MS);
    await recoverPayments({ store, payments, processor }, { limit: 1000 });
    expect((await store.get(order.lease.key))?.status).not.toBe('ABANDONED');

    clock.advance(LEASE_MS * 2);
    const asked: string[] = [];
    await recoverPayments(
      { store, payments, processor },
      { limit: 1000 },
      {
        'POST /orders': async (lease) => {
          asked.push(lease.key);
          return { kind: 'retry', reason: 'not yet' };
        },
      },
    );
    expect(asked).toContain(order.lease.key);
  });
});

/** The late owner's payment row, as the handler would stage it. */
function paymentsRow(payments: PaymentsStore, paymentId: string, charge: Charge, lease: Lease) {
  return payments.putPayment(ACCOUNT, paymentFromCharge(charge, paymentId), lease.downstreamKey);
}
