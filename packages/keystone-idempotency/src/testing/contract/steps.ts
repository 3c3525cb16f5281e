import assert from 'node:assert/strict';
import type { IdempotencyStore } from '../../engine/contract.js';
import {
  CheckpointTooLargeError,
  EffectConditionFailedError,
  LeaseLostError,
  StepOutcomeUnknownError,
  StepResultNotJsonError,
  StepUsageError,
  TooManyEffectsError,
  TooManyStepsError,
} from '../../engine/errors.js';
import { ClaimedOperation } from '../../engine/operation.js';
import { type IdempotencyRecord, type Lease, RecordStatus } from '../../engine/record.js';
import { DEFAULT_MAX_STEPS, StepState } from '../../engine/steps.js';
import { ManualClock } from '../manual-clock.js';
import { assertMatches, rejection } from '../match.js';
import { acquire, acquireRecoverable, type Contract, created, LEASE_MS, newKey, ODD_TEXT } from './context.js';

/** Recovery points (steps): checkpoints with their effects, resumed, fenced, limited. */
export function describeSteps<TEffect>(contract: Contract<TEffect>): void {
  const { h, describe, it, store, stored, countingIt, faultIt, faultyStore, loseReplies } = contract;
  describe('recovery points (steps)', () => {
    /** The operation's handle over a lease, as every adapter builds it. */
    const operation = (s: IdempotencyStore<TEffect>, lease: Lease) => new ClaimedOperation(s, lease);
    /**
     * A case on a store with checkpoints; a store without them must refuse a step before it runs, and that is
     * all the case checks of it.
     */
    const stepIt = (name: string, test: (s: IdempotencyStore<TEffect>, clock: ManualClock) => Promise<void>) =>
      it(name, async () => {
        const clock = new ManualClock(Date.now());
        const s = store(clock, { ttlSeconds: 3600 });
        if (typeof s.checkpoint === 'function') return test(s, clock);
        const lease = await acquire(s, newKey());
        let ran = false;
        const refused = await rejection(
          operation(s, lease).handle.step('a', async () => {
            ran = true;
          }),
        );
        assert.ok(refused instanceof StepUsageError && refused.reason === 'unsupported', `got ${refused}`);
        assert.equal(ran, false);
      });

    stepIt('checkpoints each step with its effects in one write, and the commit keeps the progress', async (s) => {
      const key = newKey();
      const lease = await acquire(s, key);
      const op = operation(s, lease);
      const reserved = await op.handle.step('reserve', async (step) => {
        step.stage(h.effect(key, 'reserve'));
        return { units: 2 };
      });
      assert.deepEqual(reserved, { units: 2 });
      assert.equal(await h.rowsUnder(key), 1, "the step's effect committed with its checkpoint");
      const charge = await op.handle.step('charge', async (step) => ({ id: `ch_${step.downstreamKey}` }));
      assert.equal(charge.id, `ch_${lease.downstreamKey}:charge`);
      assertMatches(await stored(key, s), {
        status: RecordStatus.InProgress,
        progress: {
          revision: 2,
          steps: [
            { name: 'reserve', state: StepState.Done, result: { units: 2 }, attempt: 1 },
            { name: 'charge', state: StepState.Done, result: charge, attempt: 1 },
          ],
        },
      });
      await op.commit(created);
      assertMatches(await stored(key, s), { status: RecordStatus.Completed, progress: { revision: 2 } });
    });

    stepIt('resumes a takeover after a crash between steps: a step done never runs again', async (s, clock) => {
      const key = newKey();
      const first = await acquire(s, key);
      await operation(s, first).handle.step('reserve', async (step) => {
        step.stage(h.effect(key, 'reserve'));
        return 'reserved';
      });
      // Crash: no release, no commit. The lease runs out and a retry takes the operation over.
      clock.advance(LEASE_MS + 1);
      const second = await acquire(s, key);
      assertMatches(second, { takeover: true, attempt: 2, progress: { revision: 1 } });
      const resumed = operation(s, second);
      let reran = false;
      const again = await resumed.handle.step('reserve', async () => {
        reran = true;
        return 'again';
      });
      assert.equal(reran, false);
      assert.equal(again, 'reserved', 'the recorded result');
      const keys: string[] = [];
      await resumed.handle.step('charge', async (step) => keys.push(step.downstreamKey));
      assert.deepEqual(keys, [`${first.downstreamKey}:charge`]);
      await resumed.commit(created);
      assert.equal(await h.rowsUnder(key), 1);
    });

    stepIt(
      'gives results holding a NUL and lone surrogates back exactly to the owner that takes over',
      async (s, clock) => {
        const key = newKey();
        const first = operation(s, await acquire(s, key));
        const results = ODD_TEXT.map((odd) => ({ [odd]: [odd, `${odd}${odd}`] }));
        for (const [i, result] of results.entries()) {
          assert.deepStrictEqual(await first.handle.step(`s${i}`, async () => result), result);
        }
        assert.deepStrictEqual(
          (await stored(key, s))?.progress?.steps.map((step) => step.result),
          results,
        );
        // Crash: the next owner reads every result from the store.
        clock.advance(LEASE_MS + 1);
        const resumed = operation(s, await acquire(s, key));
        for (const [i, result] of results.entries()) {
          const again = await resumed.handle.step(`s${i}`, async () => assert.fail(`step s${i} ran again`));
          assert.deepStrictEqual(again, result, `step s${i}`);
        }
      },
    );

    stepIt('runs a deduping step that crashed inside again, under the same step key', async (s, clock) => {
      const key = newKey();
      const first = await acquire(s, key);
      const keys: string[] = [];
      await rejection(
        operation(s, first).handle.step('charge', async (step) => {
          keys.push(step.downstreamKey);
          throw new Error('crashed after the call');
        }),
      );
      clock.advance(LEASE_MS + 1);
      const second = await acquire(s, key);
      await operation(s, second).handle.step('charge', async (step) => {
        keys.push(step.downstreamKey);
        step.stage(h.effect(key, 'charge'));
      });
      assert.deepEqual(keys, [`${first.downstreamKey}:charge`, `${first.downstreamKey}:charge`]);
      assert.equal(await h.rowsUnder(key), 1);
    });

    stepIt('asks the resolver of a step found started: found is recorded without running it', async (s, clock) => {
      const key = newKey();
      const first = await acquire(s, key);
      await rejection(
        operation(s, first).handle.step(
          'ship',
          async () => {
            throw new Error('crashed inside the call');
          },
          { resolve: async () => ({ notFound: true }), landsWithinMs: 0 },
        ),
      );
      assertMatches(await stored(key, s), { progress: { steps: [{ name: 'ship', state: StepState.Started }] } });
      clock.advance(LEASE_MS + 1);
      const op = operation(s, await acquire(s, key));
      let ran = false;
      const shipment = await op.handle.step(
        'ship',
        async () => {
          ran = true;
          return { id: 'shp_new' };
        },
        {
          resolve: async (step) => {
            step.stage(h.effect(key, 'ship'));
            return { found: { id: 'shp_1' } };
          },
          landsWithinMs: 0,
        },
      );
      assert.equal(ran, false);
      assert.deepEqual(shipment, { id: 'shp_1' });
      assert.equal(await h.rowsUnder(key), 1, "the resolver's effects commit with the step's checkpoint");
      assertMatches(await stored(key, s), { progress: { steps: [{ name: 'ship', state: StepState.Done }] } });
    });

    stepIt(
      'runs a started step the resolver did not find, and retries later one it could not tell',
      async (s, clock) => {
        const key = newKey();
        const first = await acquire(s, key);
        await rejection(
          operation(s, first).handle.step(
            'ship',
            async () => {
              throw new Error('crashed');
            },
            { resolve: async () => ({ notFound: true }), landsWithinMs: 0 },
          ),
        );
        clock.advance(LEASE_MS + 1);
        const unknown = await rejection(
          operation(s, await acquire(s, key)).handle.step('ship', async () => 'ran', {
            resolve: async () => ({ unknown: true }),
            landsWithinMs: 0,
          }),
        );
        assert.ok(unknown instanceof StepOutcomeUnknownError, `got ${unknown}`);
        assertMatches(await stored(key, s), { progress: { steps: [{ name: 'ship', state: StepState.Started }] } });
        clock.advance(LEASE_MS + 1);
        const ran = await operation(s, await acquire(s, key)).handle.step('ship', async () => 'ran', {
          resolve: async () => ({ notFound: true }),
          landsWithinMs: 0,
        });
        assert.equal(ran, 'ran');
        assertMatches(await stored(key, s), {
          progress: { steps: [{ name: 'ship', state: StepState.Done, result: 'ran', attempt: 3 }] },
        });
      },
    );

    stepIt(
      "fences an owner taken over mid-step: its step's checkpoint and effects are not written",
      async (s, clock) => {
        const key = newKey();
        const stale = operation(s, await acquire(s, key));
        const lost = await rejection(
          stale.handle.step('charge', async (step) => {
            clock.advance(LEASE_MS + 1);
            const current = await acquire(s, key); // a retry takes over while this owner is still in its step
            assert.equal(current.downstreamKey, stale.lease.downstreamKey);
            step.stage(h.effect(key, 'stale'));
            return 'stale';
          }),
        );
        assert.ok(lost instanceof LeaseLostError, `expected LeaseLostError, got ${lost}`);
        assert.equal(await h.rowsUnder(key), 0);
        assert.equal((await stored(key, s))?.progress, undefined);
      },
    );

    stepIt('refuses a checkpoint that does not follow the stored revision', async (s) => {
      const key = newKey();
      const lease = await acquire(s, key);
      const done = (result: string) => ({ name: 'a', state: StepState.Done, result, attempt: 1, at: 1 });
      await s.checkpoint!(lease, { revision: 1, steps: [done('first')] });
      const skipped = await rejection(
        s.checkpoint!(lease, { revision: 3, steps: [done('third')] }, [h.effect(key, 'x')]),
      );
      assert.ok(skipped instanceof LeaseLostError, `got ${skipped}`);
      assert.equal(await h.rowsUnder(key), 0);
      assertMatches(await stored(key, s), { progress: { revision: 1, steps: [{ result: 'first' }] } });
    });

    stepIt(
      'writes neither the progress nor any effect when an effect of a checkpoint fails its condition',
      async (s) => {
        const done = { name: 'a', state: StepState.Done, attempt: 1, at: 1 };
        for (const index of [0, 1, 2]) {
          const key = newKey();
          const lease = await acquire(s, key);
          const effects = [h.effect(key, 'p'), h.effect(key, 'q')];
          effects.splice(index, 0, h.blockedEffect());
          const error = await rejection(s.checkpoint!(lease, { revision: 1, steps: [done] }, effects));
          assert.ok(error instanceof EffectConditionFailedError, `expected EffectConditionFailedError, got ${error}`);
          assert.equal(error.index, index);
          assert.equal(await h.rowsUnder(key), 0);
          assert.equal((await stored(key, s))?.progress, undefined);
          // Nothing written: the same checkpoint without the failing effect is the next one still.
          await s.checkpoint!(lease, { revision: 1, steps: [done] }, [h.effect(key, 'p')]);
          assert.equal(await h.rowsUnder(key), 1);
        }
      },
    );

    stepIt('refuses a checkpoint once its owner released or committed the record, writing nothing', async (s) => {
      const done = { name: 'late', state: StepState.Done, result: 'late', attempt: 1, at: 1 };
      for (const end of ['release', 'commit'] as const) {
        const key = newKey();
        const lease = await acquire(s, key);
        if (end === 'release') assert.equal(await s.release(lease), true);
        else await s.commit(lease, created);
        const late = await rejection(s.checkpoint!(lease, { revision: 1, steps: [done] }, [h.effect(key, 'late')]));
        assert.ok(late instanceof LeaseLostError, `after ${end}: got ${late}`);
        assert.equal(await h.rowsUnder(key), 0, `after ${end}: no effect`);
        assert.equal((await stored(key, s))?.progress, undefined, `after ${end}: no progress`);
      }
    });

    stepIt('changes nothing of the record but its progress: its lease, expiry and recovery set stay', async (s) => {
      const fields = (record: IdempotencyRecord | undefined) => {
        const { progress: _progress, ...rest } = record ?? ({} as IdempotencyRecord);
        return rest;
      };
      for (const lease of [await acquireRecoverable(s, newKey()), await acquire(s, newKey())]) {
        const before = await stored(lease.key, s);
        await s.checkpoint!(lease, { revision: 1, steps: [{ name: 'a', state: StepState.Done, attempt: 1, at: 1 }] });
        const after = await stored(lease.key, s);
        assertMatches(after, { progress: { revision: 1 } });
        assert.deepStrictEqual(fields(after), fields(before), `${lease.key}: only the progress changed`);
      }
    });

    stepIt('keeps an unfinished operation’s progress 30 days past any TTL', async (s, clock) => {
      const key = newKey();
      const first = await acquireRecoverable(s, key);
      await operation(s, first).handle.step('reserve', async () => 'reserved');
      // Crash: no release, no commit. Recovery is down for a month.
      clock.advance(30 * 24 * 3_600_000);
      const resumed = await s.resume(key);
      assertMatches(resumed, {
        kind: 'acquired',
        lease: { takeover: true, downstreamKey: first.downstreamKey, progress: { revision: 1 } },
      });
    });

    stepIt('starts a new generation after expiry: no progress, new step keys', async (s, clock) => {
      const key = newKey();
      const first = await acquire(s, key);
      const op = operation(s, first);
      await op.handle.step('charge', async () => 'charged');
      assert.equal(await op.release(), true);
      assertMatches(await stored(key, s), { status: RecordStatus.Released, progress: { revision: 1 } });
      clock.advance(3_600_000 + LEASE_MS + 1_000);
      const fresh = await acquire(s, key);
      assert.equal(fresh.takeover, false);
      assert.equal(fresh.progress, undefined);
      assert.notEqual(fresh.downstreamKey, first.downstreamKey);
      const keys: string[] = [];
      await operation(s, fresh).handle.step('charge', async (step) => keys.push(step.downstreamKey));
      assert.deepEqual(keys, [`${fresh.downstreamKey}:charge`]);
    });

    stepIt('keeps the progress through release, takeover and abandon', async (s) => {
      const key = newKey();
      const claimed = await s.claim(key, 'fp', { recoverable: true });
      if (claimed.kind !== 'acquired') assert.fail(claimed.kind);
      const op = operation(s, claimed.lease);
      await op.handle.step('a', async () => 1);
      await op.release();
      const resumed = await s.resume(key);
      if (resumed.kind !== 'acquired') assert.fail(resumed.kind);
      assertMatches(resumed.lease, { progress: { revision: 1, steps: [{ name: 'a', result: 1 }] } });
      assert.equal(await s.abandon(resumed.lease), true);
      assertMatches(await stored(key, s), { status: RecordStatus.Abandoned, progress: { revision: 1 } });
    });

    stepIt('checks the limits before a step runs, and what it returns before writing it', async (s) => {
      const lease = await acquire(s, newKey());
      const op = operation(s, lease);
      const maxSteps = s.maxSteps ?? DEFAULT_MAX_STEPS;
      for (let i = 0; i < maxSteps; i++) await op.handle.step(`s${i}`, async () => i);
      let ran = false;
      const tooMany = await rejection(
        op.handle.step('one-more', async () => {
          ran = true;
        }),
      );
      assert.ok(tooMany instanceof TooManyStepsError, `got ${tooMany}`);
      assert.equal(ran, false);

      const other = operation(s, await acquire(s, newKey()));
      const huge = await rejection(
        other.handle.step('huge', async () => 'x'.repeat((s.maxCheckpointBytes ?? 65_536) + 1)),
      );
      assert.ok(huge instanceof CheckpointTooLargeError, `got ${huge}`);
      const notJson = await rejection(other.handle.step('dated', async () => ({ at: new Date(0) })));
      assert.ok(notJson instanceof StepResultNotJsonError && notJson.path === '$.at', `got ${notJson}`);
      assert.equal((await stored(other.lease.key, s))?.progress, undefined, 'nothing written');
      const effects = await rejection(
        other.handle.step('many', async (step) => {
          step.stage(...Array.from({ length: s.maxEffects + 1 }, (_, i) => h.effect(other.lease.key, `e${i}`)));
        }),
      );
      assert.ok(effects instanceof TooManyEffectsError, `got ${effects}`);
      const repeated = await rejection(other.handle.step('huge', async () => 1));
      assert.ok(repeated instanceof StepUsageError && repeated.reason === 'duplicate_name', `got ${repeated}`);
    });

    countingIt(
      'checkpoints in one round trip, with effects or without, and refuses one out of turn in one',
      async (counter) => {
        const s = store();
        if (typeof s.checkpoint !== 'function') return;
        const key = newKey();
        const lease = await acquire(s, key);
        const done = (...names: string[]) => names.map((name) => ({ name, state: StepState.Done, attempt: 1, at: 1 }));
        const checkpoints: [string, Promise<unknown>][] = [];
        const once = async (what: string, write: () => Promise<unknown>) => {
          counter.reset();
          checkpoints.push([what, write()]);
          await checkpoints.at(-1)?.[1].catch(() => undefined);
          assert.equal(counter.count, 1, what);
        };
        await once('without effects', () => s.checkpoint!(lease, { revision: 1, steps: done('a') }));
        await once('with effects', () =>
          s.checkpoint!(lease, { revision: 2, steps: done('a', 'b') }, [h.effect(key, 'b')]),
        );
        await once('out of turn', () => s.checkpoint!(lease, { revision: 4, steps: done('a', 'b', 'c') }));
        await once('out of turn, with effects', () =>
          s.checkpoint!(lease, { revision: 4, steps: done('a', 'b', 'c') }, [h.effect(key, 'c')]),
        );
        const refused = await Promise.all(
          checkpoints.map(([, write]) =>
            write.then(
              () => undefined,
              (e: unknown) => e,
            ),
          ),
        );
        assert.deepEqual(
          refused.map((error) => error instanceof LeaseLostError),
          [false, false, true, true],
        );
        assert.equal(await h.rowsUnder(key), 1);
      },
    );

    faultIt('checkpoints once when the client sends again a checkpoint whose reply was lost', async () => {
      const s = faultyStore();
      if (typeof s.checkpoint !== 'function') return;
      const key = newKey();
      const op = operation(s, await acquire(s, key));
      const lost = loseReplies('commit', key);
      await op.handle.step('reserve', async (step) => {
        step.stage(h.effect(key, 'reserve'));
      });
      assert.equal(lost.fired(), 1);
      assert.equal(await h.rowsUnder(key), 1);
      assertMatches(await stored(key, s), { progress: { revision: 1, steps: [{ name: 'reserve', state: 'done' }] } });
    });

    faultIt('checkpoints once when the caller sends a checkpoint again after the client gave up', async () => {
      const s = faultyStore({ attempts: 1 });
      if (typeof s.checkpoint !== 'function') return;
      const key = newKey();
      const lease = await acquire(s, key);
      const progress = { revision: 1, steps: [{ name: 'a', state: StepState.Done, attempt: 1, at: 1 }] };
      const lost = loseReplies('commit', key);
      await rejection(s.checkpoint(lease, progress, [h.effect(key, 'once')]));
      assert.equal(lost.fired(), 1);
      await s.checkpoint(lease, progress, [h.effect(key, 'once')]);
      assert.equal(await h.rowsUnder(key), 1);
      assertMatches(await stored(key, s), { progress: { revision: 1 } });
    });
  });
}
