import assert from 'node:assert/strict';
import { LeaseLostError } from '../../engine/errors.js';
import { RecordStatus } from '../../engine/record.js';
import { ManualClock } from '../manual-clock.js';
import { assertMatches } from '../match.js';
import { acquireRecoverable, type Contract, created, LEASE_MS, landed, newKey } from './context.js';

/** Recovery's resume: a takeover by key that never creates a record or disturbs a live owner. */
export function describeResume<TEffect>(contract: Contract<TEffect>): void {
  const { h, describe, it, store, stored } = contract;
  describe('resume (recovery taking over by key)', () => {
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

    it('refuses a resume that a late commit beat: the completion and its one effect stay', async () => {
      // Recovery reads the record (its owner's lease ran out) and the slow owner's commit lands before recovery's
      // takeover: the takeover must meet the completion. Raced on ten keys: either may land first, never both win.
      const clock = new ManualClock(Date.now());
      const s = store(clock);
      const keys = Array.from({ length: 10 }, () => newKey());
      const slow = await Promise.all(keys.map((key) => acquireRecoverable(s, key)));
      clock.advance(LEASE_MS + 1);
      await Promise.all(
        keys.map(async (key, i) => {
          const [recovery, late] = await Promise.all([
            s.resume(key),
            landed(s.commit(slow[i]!, created, [h.effect(key, 'late')])),
          ]);
          if (recovery.kind === 'acquired') {
            assert.equal(late, false, `${key}: the late commit and recovery's takeover both won`);
            await s.commit(recovery.lease, created, [h.effect(key, 'recovered')]);
          } else {
            assert.equal(late, true, `${key}: recovery lost to nobody (${recovery.kind})`);
            assertMatches(recovery, { kind: 'completed', record: { status: RecordStatus.Completed } });
          }
          assert.equal(await h.rowsUnder(key), 1, `${key}: one effect`);
        }),
      );
    });

    it('lets exactly one of a client’s retry and recovery take a released operation over', async () => {
      const s = store(new ManualClock(Date.now()));
      const keys = Array.from({ length: 10 }, () => newKey());
      for (const key of keys) assert.equal(await s.release(await acquireRecoverable(s, key)), true);
      await Promise.all(
        keys.map(async (key) => {
          const [retry, recovery] = await Promise.all([s.claim(key, 'fp'), s.resume(key)]);
          const winners = [retry, recovery].filter((outcome) => outcome.kind === 'acquired');
          assert.deepEqual(
            [retry.kind, recovery.kind].sort(),
            ['acquired', 'in_flight'],
            `${key}: the retry ${retry.kind}, recovery ${recovery.kind}`,
          );
          const winner = winners[0];
          if (winner?.kind !== 'acquired') assert.fail('expected a winner');
          await s.commit(winner.lease, created, [h.effect(key, 'once')]);
          assert.equal(await h.rowsUnder(key), 1);
        }),
      );
    });

    it('takes an abandoned operation back into the recovery set, with no expiry left', async () => {
      const clock = new ManualClock(Date.now());
      const s = store(clock, { ttlSeconds: 3600 });
      const key = newKey();
      const first = await acquireRecoverable(s, key);
      assert.equal(await s.abandon(first), true);
      const resumed = await s.resume(key);
      assertMatches(resumed, {
        kind: 'acquired',
        lease: { downstreamKey: first.downstreamKey, takeover: true, recoverable: true },
      });
      // The takeover writes the record whole: the abandonment's expiry goes with it, so nothing can expire it now.
      const record = await stored(key, s);
      assert.equal(record?.expiresAt, undefined, 'recoverable again: no expiry');
      assert.notEqual(record?.recoverAt, undefined, 'in the recovery set again');
    });
  });
}
