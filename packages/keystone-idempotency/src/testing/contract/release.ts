import assert from 'node:assert/strict';
import { RecordStatus } from '../../engine/record.js';
import { ManualClock } from '../manual-clock.js';
import { assertMatches } from '../match.js';
import { acquire, type Contract, created, LEASE_MS, newKey } from './context.js';

/** Releases: the key freed for a retry, fenced by the lease token. */
export function describeRelease<TEffect>(contract: Contract<TEffect>): void {
  const { h, describe, it, store, stored } = contract;
  describe('release', () => {
    it('frees the key for a retry that keeps the fingerprint check and the downstream key', async () => {
      const s = store();
      const key = newKey();
      const first = await acquire(s, key);
      assert.equal(await s.release(first), true);
      assert.equal((await s.claim(key, 'other')).kind, 'mismatch');
      const retry = await s.claim(key, 'fp');
      assert.equal(retry.kind, 'acquired');
      if (retry.kind === 'acquired') {
        assert.equal(retry.lease.downstreamKey, first.downstreamKey);
        assert.equal(retry.lease.takeover, true);
      }
    });

    it('ends the lease when it releases, keeping the fingerprint and the downstream key', async () => {
      const clock = new ManualClock(Date.now());
      const s = store(clock);
      const key = newKey();
      const lease = await acquire(s, key);
      clock.advance(1_000);
      assert.equal(await s.release(lease), true);
      assertMatches(await stored(key, s), {
        status: RecordStatus.Released,
        leaseToken: lease.leaseToken,
        leaseExpiresAt: clock.now(),
        fingerprint: 'fp',
        downstreamKey: lease.downstreamKey,
      });
    });

    it('never touches a claim it does not own', async () => {
      const clock = new ManualClock();
      const s = store(clock);
      const key = newKey();
      const stale = await acquire(s, key);
      clock.advance(LEASE_MS + 1);
      const current = await acquire(s, key);
      assert.equal(await s.release(stale), false);
      assert.equal((await s.claim(key, 'fp')).kind, 'in_flight');
      assertMatches(await stored(key, s), { status: RecordStatus.InProgress, leaseToken: current.leaseToken });
    });

    it('makes the Powertools duplicate-deletes-the-original race impossible', async () => {
      // Powertools 2.35: a duplicate that is turned away deletes the in-progress record it never owned, and a third
      // request then runs the handler again. Here a duplicate holds no lease, so it has nothing to release, and the
      // original keeps its claim through any number of duplicates.
      const s = store();
      const key = newKey();
      const original = await acquire(s, key);
      const duplicates = await Promise.all(Array.from({ length: 5 }, () => s.claim(key, 'fp')));
      assert.deepEqual(
        duplicates.map((d) => d.kind),
        Array(5).fill('in_flight'),
      );
      const third = await s.claim(key, 'fp');
      assert.equal(third.kind, 'in_flight');
      await s.commit(original, created, [h.effect(key, 'once')]);
      assert.equal(await h.rowsUnder(key), 1);
    });

    it('cannot release a completed record', async () => {
      const s = store();
      const key = newKey();
      const first = await acquire(s, key);
      await s.commit(first, created);
      assert.equal(await s.release(first), false);
      assertMatches(await s.claim(key, 'fp'), { kind: 'replay' });
    });
  });
}
