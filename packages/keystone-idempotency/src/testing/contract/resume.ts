import assert from 'node:assert/strict';
import type { IdempotencyStore } from '../../engine/contract.js';
import { LeaseLostError } from '../../engine/errors.js';
import { type Lease, RecordStatus } from '../../engine/record.js';
import { ManualClock } from '../manual-clock.js';
import { assertMatches } from '../match.js';
import { type Contract, created, LEASE_MS, newKey } from './context.js';

/** Recovery's resume: a takeover by key that never creates a record or disturbs a live owner. */
export function describeResume<TEffect>(contract: Contract<TEffect>): void {
  const { h, describe, it, store, stored } = contract;
  describe('resume (recovery taking over by key)', () => {
    /** Claims `key` for work whose effect lives elsewhere: tracked in the recovery set. */
    async function acquireRecoverable(s: IdempotencyStore<TEffect>, key: string): Promise<Lease> {
      const outcome = await s.claim(key, 'fp', { recoverable: true });
      if (outcome.kind !== 'acquired') assert.fail(`expected to acquire ${key}, got ${outcome.kind}`);
      return outcome.lease;
    }

    it('takes over a released operation, keeping its fingerprint and downstream key', async () => {
      const s = store(new ManualClock(Date.now()));
      const key = newKey();
      const first = await acquireRecoverable(s, key);
      assert.equal(await s.release(first), true);
      const resumed = await s.resume(key);
      assertMatches(resumed, {
        kind: 'acquired',
        lease: { downstreamKey: first.downstreamKey, fingerprint: 'fp', takeover: true, attempt: 2 },
      });
      if (resumed.kind !== 'acquired') assert.fail('expected to resume');
      await s.commit(resumed.lease, created, [h.effect(key, 'recovered')]);
      assertMatches(await s.claim(key, 'fp'), { kind: 'replay', response: created });
      assert.equal(await h.rowsUnder(key), 1);
    });

    it('takes over an owner whose lease ran out, and never disturbs a live one', async () => {
      const clock = new ManualClock(Date.now());
      const s = store(clock);
      const key = newKey();
      const owner = await acquireRecoverable(s, key);
      const live = await s.resume(key);
      assert.equal(live.kind, 'in_flight');
      if (live.kind === 'in_flight') assert.ok(live.retryAfterMs > 0, `retryAfterMs ${live.retryAfterMs}`);
      clock.advance(LEASE_MS + 1);
      const resumed = await s.resume(key);
      assertMatches(resumed, { kind: 'acquired', lease: { downstreamKey: owner.downstreamKey, attempt: 2 } });
      await assert.rejects(s.commit(owner, created), LeaseLostError);
    });

    it('answers completed for a committed operation, and absent for a key never claimed, creating nothing', async () => {
      const s = store(new ManualClock(Date.now()));
      const key = newKey();
      await s.commit(await acquireRecoverable(s, key), created);
      assertMatches(await s.resume(key), { kind: 'completed', record: { key, status: RecordStatus.Completed } });
      const never = newKey();
      assertMatches(await s.resume(never), { kind: 'absent' });
      assert.equal(await stored(never, s), undefined);
    });

    it('answers absent for another generation than the downstream key it is given', async () => {
      const s = store(new ManualClock(Date.now()));
      const key = newKey();
      const first = await acquireRecoverable(s, key);
      await s.release(first);
      assertMatches(await s.resume(key, { downstreamKey: 'idk_another_generation' }), { kind: 'absent' });
      assertMatches(await s.resume(key, { downstreamKey: first.downstreamKey }), { kind: 'acquired' });
    });

    it('never lets an unfinished recoverable operation expire, however long recovery takes', async () => {
      const clock = new ManualClock(Date.now());
      const s = store(clock, { ttlSeconds: 60 });
      const crashed = newKey();
      const released = newKey();
      const owner = await acquireRecoverable(s, crashed);
      await s.release(await acquireRecoverable(s, released));
      clock.advance(10 * 60_000);
      assertMatches(await s.get(crashed), { status: RecordStatus.InProgress, downstreamKey: owner.downstreamKey });
      assertMatches(await s.get(released), { status: RecordStatus.Released });
      // A late retry takes it over under the same downstream key, never as a fresh generation.
      assertMatches(await s.claim(crashed, 'fp'), {
        kind: 'acquired',
        lease: { takeover: true, downstreamKey: owner.downstreamKey },
      });
      assertMatches(await s.resume(released), { kind: 'acquired', lease: { takeover: true } });
    });
  });
}
