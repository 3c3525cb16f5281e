import { randomUUID } from 'node:crypto';
import type { IdempotencyStore } from '../../src/engine/contract';
import { DriverStore } from '../../src/engine/driver-store';
import { StepRefusedError, StepUsageError } from '../../src/engine/errors';
import { scopedKey } from '../../src/engine/key';
import { makeIdempotent } from '../../src/engine/make-idempotent';
import { ClaimedOperation, type IdempotencyHandle } from '../../src/engine/operation';
import { RecordStatus, type StoredResponse } from '../../src/engine/record';
import { recoverDue } from '../../src/engine/recovery';
import type { StepEvent } from '../../src/engine/steps';
import { IDEMPOTENCY_DISABLED_ENV } from '../../src/engine/switch';
import { FakeClock } from '../support/fake-clock';
import { MemoryDriver } from '../support/memory-driver';
import { storeHarnesses } from '../support/stores';

/**
 * Recovery points through the engine's lifecycle: `makeIdempotent` (as every adapter, through `ClaimedOperation`),
 * and recovery's `continue` verdict, which drives an unfinished multi-step operation forward from its last recovery
 * point, compensates one that can never finish, or abandons it with its progress kept. On both real stores.
 */
const LEASE_MS = 30_000;
const created: StoredResponse = { statusCode: 201, body: '{"id":"ord_1"}', headers: {} };
const newKey = () => scopedKey({ accountId: 'acct_s', operation: 'POST /orders', key: randomUUID() });
const quiet = { warn: () => undefined, error: () => undefined };

describe.each(storeHarnesses)('steps on %s', (_name, harness) => {
  const h = harness();

  describe('makeIdempotent', () => {
    it('resumes a retry after the step that failed: steps done are not run again, and each is counted', async () => {
      const store = h.store({ leaseSeconds: 30 });
      const events: StepEvent[] = [];
      const calls: string[] = [];
      let mailerUp = false;
      const placeOrder = makeIdempotent(
        async (order: { id: string }, idempotency: IdempotencyHandle<unknown>) => {
          const charge = await idempotency.step('charge', async (step) => {
            calls.push(`charge ${step.downstreamKey}`);
            step.stage(h.effect(order.id, 'charge'));
            return { id: 'ch_1' };
          });
          await idempotency.step('email', async () => {
            calls.push('email');
            if (!mailerUp) throw new Error('mailer down');
            return 'sent';
          });
          return { order: order.id, charge: charge.id };
        },
        { store, name: 'place-order', key: (order) => order.id, onStep: (event) => events.push(event) },
      );
      const order = { id: randomUUID() };
      await expect(placeOrder(order)).rejects.toThrow('mailer down');
      mailerUp = true;
      await expect(placeOrder(order)).resolves.toEqual({ order: order.id, charge: 'ch_1' });
      await expect(placeOrder(order)).resolves.toEqual({ order: order.id, charge: 'ch_1' }); // a replay
      expect(calls.filter((call) => call.startsWith('charge'))).toHaveLength(1);
      expect(calls.filter((call) => call === 'email')).toHaveLength(2);
      expect(await h.rowsUnder(order.id)).toBe(1);
      expect(events.map((event) => `${event.step} ${event.outcome} ${event.attempt}`)).toEqual([
        'charge ran 1',
        'email failed 1',
        'charge replayed 2',
        'email ran 2',
      ]);
    });

    it('runs every step on every call while idempotency is switched off, recording nothing', async () => {
      process.env[IDEMPOTENCY_DISABLED_ENV] = 'true';
      try {
        let runs = 0;
        const work = makeIdempotent(
          async (_input: { id: string }, idempotency: IdempotencyHandle<unknown>) =>
            idempotency.step('a', async () => ++runs),
          { store: h.store(), name: 'switched-off', key: (input) => input.id },
        );
        await work({ id: 'same' });
        await work({ id: 'same' });
        expect(runs).toBe(2);
      } finally {
        delete process.env[IDEMPOTENCY_DISABLED_ENV];
      }
    });
  });

  describe('recovery', () => {
    /** A multi-step operation that crashed after its first step: claimed recoverable, step one done, no release. */
    async function crashedAfterFirstStep(s: IdempotencyStore<unknown>, key: string) {
      const claimed = await s.claim(key, 'fp', { recoverable: true });
      if (claimed.kind !== 'acquired') throw new Error(claimed.kind);
      await new ClaimedOperation(s, claimed.lease).handle.step('reserve', async (step) => {
        step.stage(h.effect(key, 'reserve'));
        return { units: 2 };
      });
      return claimed.lease;
    }

    it('drives an operation whose client never came back forward from its last recovery point', async () => {
      const clock = new FakeClock(Date.now());
      const s = (await h.isolatedStores())({ clock, leaseSeconds: LEASE_MS / 1000, ttlSeconds: 3600 });
      const key = newKey();
      const first = await crashedAfterFirstStep(s, key);
      clock.advance(LEASE_MS + 1);
      let reserved = 0;
      const chargeKeys: string[] = [];
      const report = await recoverDue(
        s,
        async () => ({
          kind: 'continue',
          work: async (handle) => {
            await handle.step('reserve', async () => {
              reserved += 1;
              return { units: 0 };
            });
            await handle.step('charge', async (step) => chargeKeys.push(step.downstreamKey));
            handle.stage(h.effect(key, 'order'));
            return created;
          },
        }),
        { logger: quiet },
      );
      expect(report).toMatchObject({ completed: 1, steps: { replayed: 1, ran: 1 } });
      expect(reserved).toBe(0);
      expect(chargeKeys).toEqual([`${first.downstreamKey}:charge`]);
      expect(await h.rowsUnder(key)).toBe(2);
      const claimed = await s.claim(key, 'fp');
      expect(claimed).toMatchObject({ kind: 'replay', response: created });
    });

    it('compensates the steps done, in reverse, when a step is refused for good, and stores the refusal', async () => {
      const clock = new FakeClock(Date.now());
      const s = (await h.isolatedStores())({ clock, leaseSeconds: LEASE_MS / 1000, ttlSeconds: 3600 });
      const key = newKey();
      await crashedAfterFirstStep(s, key);
      clock.advance(LEASE_MS + 1);
      const undone: string[] = [];
      const declined: StoredResponse = { statusCode: 402, body: '{"type":"declined"}', headers: {} };
      const run = () =>
        recoverDue(
          s,
          async () => ({
            kind: 'continue',
            work: async (handle) => {
              await handle.step('reserve', async () => ({ units: 2 }), {
                compensate: async (result, step) => {
                  undone.push(`${JSON.stringify(result)} ${step.downstreamKey}`);
                  step.stage(h.effect(key, 'unreserve'));
                },
              });
              await handle.step('charge', async () => {
                throw new StepRefusedError('charge', 'card declined', { response: declined });
              });
              return created;
            },
          }),
          { logger: quiet },
        );
      const report = await run();
      expect(report).toMatchObject({ completed: 1, compensated: 1, steps: { refused: 1, compensated: 1 } });
      expect(undone).toHaveLength(1);
      expect(undone[0]).toMatch(/^\{"units":2\} idk_\w+:reserve:compensate$/);
      expect(await h.rowsUnder(key)).toBe(2); // the reservation and its undo
      const record = await s.get(key);
      expect(record).toMatchObject({ status: RecordStatus.Completed, response: declined });
      expect(record?.progress?.steps).toMatchObject([{ name: 'reserve', state: 'compensated' }]);
      expect((await run()).due).toBe(0);
    });

    it('abandons an operation that can never finish with its progress kept, and says so', async () => {
      const clock = new FakeClock(Date.now());
      const s = (await h.isolatedStores())({ clock, leaseSeconds: LEASE_MS / 1000, ttlSeconds: 3600 });
      const key = newKey();
      await crashedAfterFirstStep(s, key);
      clock.advance(LEASE_MS + 1);
      const alarms: unknown[] = [];
      const report = await recoverDue(
        s,
        async () => ({
          kind: 'continue',
          work: async (handle) => {
            await handle.step('reserve', async () => ({ units: 2 }));
            await handle.step('ship', async () => {
              throw new StepRefusedError('ship', 'no carrier serves this address');
            });
            return created;
          },
        }),
        { logger: { warn: () => undefined, error: (message, details) => alarms.push({ message, details }) } },
      );
      expect(report).toMatchObject({ abandoned: 1, abandonedWithProgress: 1, compensated: 0 });
      expect(alarms).toHaveLength(1);
      expect(await s.get(key)).toMatchObject({
        status: RecordStatus.Abandoned,
        progress: { steps: [{ name: 'reserve', state: 'done' }] },
      });
    });

    it('retries later an operation whose started step its resolver can not yet find out', async () => {
      const clock = new FakeClock(Date.now());
      const s = (await h.isolatedStores())({ clock, leaseSeconds: LEASE_MS / 1000, ttlSeconds: 3600 });
      const key = newKey();
      const claimed = await s.claim(key, 'fp', { recoverable: true });
      if (claimed.kind !== 'acquired') throw new Error(claimed.kind);
      const ship = (handle: IdempotencyHandle<unknown>, lookup: 'unknown' | 'found') =>
        handle.step(
          'ship',
          async (): Promise<string> => {
            throw new Error('crashed inside the booking');
          },
          {
            resolve: async () => (lookup === 'unknown' ? { unknown: true as const } : { found: 'shp_1' }),
          },
        );
      await expect(ship(new ClaimedOperation(s, claimed.lease).handle, 'unknown')).rejects.toThrow('crashed');
      clock.advance(LEASE_MS + 1);
      const verdict = (lookup: 'unknown' | 'found') => async () => ({
        kind: 'continue' as const,
        work: async (handle: IdempotencyHandle<unknown>) => {
          await ship(handle, lookup);
          return created;
        },
      });
      expect(await recoverDue(s, verdict('unknown'), { logger: quiet })).toMatchObject({
        retried: 1,
        steps: { unknown: 1 },
      });
      clock.advance(LEASE_MS + 1);
      expect(await recoverDue(s, verdict('found'), { logger: quiet })).toMatchObject({
        completed: 1,
        steps: { found: 1 },
      });
    });
  });
});

describe('a store whose driver has no checkpoints', () => {
  it('refuses a step before it runs, naming why', async () => {
    const full = new MemoryDriver();
    const { checkpoint: _none, ...rest } = Object.getOwnPropertyDescriptors(MemoryDriver.prototype);
    const withoutCheckpoints = Object.create(Object.prototype, rest) as MemoryDriver;
    Object.assign(withoutCheckpoints, full);
    const store = new DriverStore(withoutCheckpoints);
    expect(store.checkpoint).toBeUndefined();
    const claimed = await store.claim(newKey(), 'fp');
    if (claimed.kind !== 'acquired') throw new Error(claimed.kind);
    let ran = false;
    const step = new ClaimedOperation(store, claimed.lease).handle.step('a', async () => {
      ran = true;
    });
    await expect(step).rejects.toBeInstanceOf(StepUsageError);
    await expect(step).rejects.toMatchObject({ reason: 'unsupported' });
    expect(ran).toBe(false);
  });
});
