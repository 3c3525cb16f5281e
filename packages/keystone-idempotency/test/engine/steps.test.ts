import { randomUUID } from 'node:crypto';
import { LEASE_MARGIN_MS } from '../../src/engine/clock';
import type { IdempotencyStore } from '../../src/engine/contract';
import { DriverStore } from '../../src/engine/driver-store';
import { StepOutcomeUnknownError, StepRefusedError, StepUsageError } from '../../src/engine/errors';
import { scopedKey } from '../../src/engine/key';
import { makeIdempotent } from '../../src/engine/make-idempotent';
import { ClaimedOperation, type IdempotencyHandle } from '../../src/engine/operation';
import { RecordStatus, type StoredResponse } from '../../src/engine/record';
import { type RecoveryVerdict, recoverDue } from '../../src/engine/recovery';
import { MARK_TO_CALL_MS } from '../../src/engine/step-runner';
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
      expect(record?.progress?.steps).toMatchObject([
        { name: 'reserve', state: 'compensated' },
        { name: 'charge', state: 'refused', result: declined },
      ]);
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
        progress: {
          steps: [
            { name: 'reserve', state: 'done' },
            { name: 'ship', state: 'refused', result: null },
          ],
        },
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
            landsWithinMs: 10_000,
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

describe.each(storeHarnesses)('a step resolved by lookup, on %s', (_name, harness) => {
  const h = harness();
  const LANDS_WITHIN_MS = 60_000;
  /** When a lookup's "not found" is final for a call begun at the mark: the rule the runner keeps. */
  const finalAfter = MARK_TO_CALL_MS + LANDS_WITHIN_MS + LEASE_MARGIN_MS;

  /** A booking in an outside system that takes no key: every call books; `lookup` is what a resolver would see. */
  function warehouse() {
    const booked: string[] = [];
    let visible = true;
    return {
      booked,
      hide: () => {
        visible = false; // the booking is on its way: made by the outside system, not yet seen by its lookup
      },
      step: (handle: IdempotencyHandle<unknown>, crash = false) =>
        handle.step(
          'ship',
          async (step) => {
            booked.push(step.downstreamKey);
            if (crash) throw new Error('the call timed out; it may still land');
            return `shp_${booked.length}`;
          },
          {
            resolve: async (step) => {
              const found = visible && booked.includes(step.downstreamKey);
              return found ? { found: `shp_${booked.indexOf(step.downstreamKey) + 1}` } : { notFound: true };
            },
            landsWithinMs: LANDS_WITHIN_MS,
          },
        ),
    };
  }

  async function setup() {
    const clock = new FakeClock(Date.now());
    const s = (await h.isolatedStores())({ clock, leaseSeconds: LEASE_MS / 1000, ttlSeconds: 3600 });
    const key = newKey();
    const acquire = async () => {
      const claimed = await s.claim(key, 'fp', { recoverable: true });
      if (claimed.kind !== 'acquired') throw new Error(claimed.kind);
      return new ClaimedOperation(s, claimed.lease);
    };
    return { clock, s, key, acquire };
  }

  it('takes "not found" as unknown while a call begun at the mark may still land, and never calls twice', async () => {
    const { clock, s, key, acquire } = await setup();
    const outside = warehouse();
    await expect(outside.step((await acquire()).handle, true)).rejects.toThrow('may still land');
    outside.hide();
    clock.advance(LEASE_MS + 1);
    const second = await acquire();
    const unknown = await outside.step(second.handle).catch((error: unknown) => error);
    expect(unknown).toBeInstanceOf(StepOutcomeUnknownError);
    expect(unknown).toMatchObject({ retryAfterMs: finalAfter - (LEASE_MS + 1) });
    expect(outside.booked).toHaveLength(1);
    // Released to come back when the call can no longer land: recovery does not come sooner either.
    await second.settle({ kind: 'transient', error: unknown });
    expect((await h.stored(key, s))?.recoverAt).toBe(clock.now() + finalAfter - (LEASE_MS + 1));
    clock.advance(finalAfter);
    await expect(outside.step((await acquire()).handle)).resolves.toBe('shp_2');
    expect(outside.booked).toHaveLength(2);
  });

  it('marks a call made again afresh, so its own lost answer is not concluded absent by the first mark', async () => {
    const { clock, acquire } = await setup();
    const outside = warehouse();
    await expect(outside.step((await acquire()).handle, true)).rejects.toThrow('may still land');
    outside.hide();
    clock.advance(finalAfter);
    // Not found, long after: the first call never landed. The second is made, and it too times out.
    await expect(outside.step((await acquire()).handle, true)).rejects.toThrow('may still land');
    expect(outside.booked).toHaveLength(2);
    clock.advance(LEASE_MS + 1);
    await expect(outside.step((await acquire()).handle)).rejects.toBeInstanceOf(StepOutcomeUnknownError);
    expect(outside.booked).toHaveLength(2);
  });

  it('does not make the call when its started mark took too long to write', async () => {
    const { clock, s, key } = await setup();
    const slow: IdempotencyStore<unknown> = Object.assign(Object.create(s), {
      checkpoint: async (...args: Parameters<NonNullable<IdempotencyStore<unknown>['checkpoint']>>) => {
        await s.checkpoint!(...args);
        clock.advance(MARK_TO_CALL_MS + 1); // the write's reply came late
      },
    });
    const claimed = await slow.claim(key, 'fp', { recoverable: true });
    if (claimed.kind !== 'acquired') throw new Error(claimed.kind);
    const outside = warehouse();
    await expect(outside.step(new ClaimedOperation(slow, claimed.lease, { clock }).handle)).rejects.toBeInstanceOf(
      StepOutcomeUnknownError,
    );
    expect(outside.booked).toHaveLength(0);
    expect((await h.stored(key, s))?.progress?.steps).toMatchObject([{ name: 'ship', state: 'started' }]);
  });
});

describe.each(storeHarnesses)('an operation refused for good, on %s', (_name, harness) => {
  const h = harness();
  const refusal: StoredResponse = { statusCode: 422, body: '{"type":"refused"}', headers: { 'Content-Type': 'x' } };

  /**
   * An order of four steps, each with a compensation but the last; `notify` refuses. Every run of a step and of a
   * compensation is counted; `failRefund` makes the charge's compensation throw that many times.
   */
  function order(key: string, options: { failRefund?: number } = {}) {
    const runs: string[] = [];
    let refundFailures = options.failRefund ?? 0;
    const work = async (handle: IdempotencyHandle<unknown>): Promise<StoredResponse> => {
      for (const name of ['reserve', 'charge', 'ship'] as const) {
        await handle.step(
          name,
          async (step) => {
            runs.push(name);
            step.stage(h.effect(key, name));
            return `${name}-done`;
          },
          {
            compensate: async (result, step) => {
              if (name === 'charge' && refundFailures > 0) {
                refundFailures -= 1;
                runs.push('undo charge failed');
                throw new Error('processor down');
              }
              runs.push(`undo ${name} (${result})`);
              step.stage(h.effect(key, `undo-${name}`));
            },
          },
        );
      }
      await handle.step('notify', async (step) => {
        runs.push('notify');
        step.stage(h.effect(key, 'notify-refused')); // the step's own record of the refusal: commits with it
        throw new StepRefusedError('notify', 'mailbox refused', { response: refusal });
      });
      return created;
    };
    return { runs, work, verdict: async (): Promise<RecoveryVerdict<unknown>> => ({ kind: 'continue', work }) };
  }

  async function setup() {
    const clock = new FakeClock(Date.now());
    const s = (await h.isolatedStores())({ clock, leaseSeconds: LEASE_MS / 1000, ttlSeconds: 3600 });
    return { clock, s, key: newKey() };
  }

  it('finishes a compensation that failed half-way on the next run, then stores the refusal', async () => {
    const { clock, s, key } = await setup();
    const { runs, verdict } = order(key);
    const claimed = await s.claim(key, 'fp', { recoverable: true });
    if (claimed.kind !== 'acquired') throw new Error(claimed.kind);
    const live = new ClaimedOperation(s, claimed.lease);
    const settled = await order(key, { failRefund: 1 })
      .work(live.handle)
      .then(
        (response) => live.settle({ kind: 'outcome', response }),
        (error: unknown) => live.settle({ kind: 'transient', error }),
      );
    expect(settled).toMatchObject({ kind: 'compensating', failures: 1, retryAfterMs: LEASE_MS });
    expect((await s.get(key))?.progress?.steps.map((step) => `${step.name} ${step.state}`)).toEqual([
      'reserve done',
      'charge done',
      'ship compensated',
      'notify refused',
    ]);
    clock.advance(LEASE_MS + 1);
    const report = await recoverDue(s, verdict, { logger: quiet });
    expect(report).toMatchObject({ completed: 1, compensated: 1, compensationFailed: 0 });
    // Nothing ran again: only the compensations left, each once, in reverse.
    expect(runs).toEqual(['undo charge (charge-done)', 'undo reserve (reserve-done)']);
    expect(await s.get(key)).toMatchObject({ status: RecordStatus.Completed, response: refusal });
    expect(await h.rowsUnder(key)).toBe(7); // three steps, the refusal's own row and three undos, each once
    expect((await recoverDue(s, verdict, { logger: quiet })).due).toBe(0);
  });

  it('backs a failing compensation off, doubling from a lease, and reports it stuck after five failures', async () => {
    const { clock, s, key } = await setup();
    const { work, verdict } = order(key, { failRefund: 100 });
    const claimed = await s.claim(key, 'fp', { recoverable: true });
    if (claimed.kind !== 'acquired') throw new Error(claimed.kind);
    const live = new ClaimedOperation(s, claimed.lease);
    await live.settle({ kind: 'transient', error: await work(live.handle).catch((e: unknown) => e) });
    const waits: number[] = [];
    const errors: unknown[] = [];
    let stuck = 0;
    for (let run = 0; run < 6; run++) {
      const recoverAt = (await h.stored(key, s))?.recoverAt ?? 0;
      waits.push(recoverAt - clock.now());
      clock.advance(recoverAt - clock.now() + 1);
      const report = await recoverDue(s, verdict, {
        logger: { warn: () => undefined, error: (message) => errors.push(message) },
      });
      expect(report).toMatchObject({ due: 1, retried: 1, compensationFailed: 1 });
      stuck += report.compensationStuck;
    }
    expect(waits.map((ms) => ms / LEASE_MS)).toEqual([1, 2, 4, 8, 16, 32]);
    expect(stuck).toBe(3); // the 5th, 6th and 7th failures since the refusal
    expect(errors).toHaveLength(3);
  });

  it('ends a live attempt that is refused: compensated, the refusal stored, and every retry refused alike', async () => {
    const { s, key } = await setup();
    const { runs, work } = order(key);
    const placeOrder = makeIdempotent(async (_input: { id: string }, handle) => work(handle), {
      store: s,
      name: 'order',
      key: () => key,
    });
    await expect(placeOrder({ id: key })).rejects.toMatchObject({ name: 'StepRefusedError', response: refusal });
    await expect(placeOrder({ id: key })).rejects.toMatchObject({ name: 'StepRefusedError', response: refusal });
    expect(runs).toEqual([
      'reserve',
      'charge',
      'ship',
      'notify',
      'undo ship (ship-done)',
      'undo charge (charge-done)',
      'undo reserve (reserve-done)',
    ]);
    expect(await h.rowsUnder(key)).toBe(7); // three steps, the refusal's own row and three undos
  });

  it('goes on compensating after a crash in the middle of it: the lease runs out, recovery takes it up', async () => {
    const { clock, s, key } = await setup();
    const { runs, verdict } = order(key);
    // The process dies in the refund: nothing releases the key.
    const dying: IdempotencyStore<unknown> = Object.assign(Object.create(s), {
      release: async () => {
        throw new Error('the process is gone');
      },
    });
    const claimed = await dying.claim(key, 'fp', { recoverable: true });
    if (claimed.kind !== 'acquired') throw new Error(claimed.kind);
    const live = new ClaimedOperation(dying, claimed.lease);
    const settled = await live.settle({
      kind: 'transient',
      error: await order(key, { failRefund: 1 })
        .work(live.handle)
        .catch((e: unknown) => e),
    });
    expect(settled).toMatchObject({ kind: 'compensating', released: false });
    expect(await recoverDue(s, verdict, { logger: quiet })).toMatchObject({ due: 0 }); // its lease still runs
    clock.advance(LEASE_MS + 1);
    expect(await recoverDue(s, verdict, { logger: quiet })).toMatchObject({ completed: 1 });
    expect(runs).toEqual(['undo charge (charge-done)', 'undo reserve (reserve-done)']);
    expect(await s.get(key)).toMatchObject({ status: RecordStatus.Completed, response: refusal });
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
