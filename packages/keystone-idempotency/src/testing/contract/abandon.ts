import assert from 'node:assert/strict';
import { RecordStatus } from '../../engine/record.js';
import { ManualClock } from '../manual-clock.js';
import { assertMatches } from '../match.js';
import { acquire, type Contract, LEASE_MS, newKey } from './context.js';

/** Abandonment: out of the recovery set, kept a full TTL, fenced by the lease token. */
export function describeAbandon<TEffect>(contract: Contract<TEffect>): void {
  const { describe, it, store, stored } = contract;
  describe('abandon', () => {
    it('gives up an operation: out of the recovery set, kept a full TTL, and a late retry keeps its downstream key', async () => {
      const clock = new ManualClock(Date.now());
      const s = store(clock, { ttlSeconds: 3600 });
      const key = newKey();
      const claimed = await s.claim(key, 'fp', { recoverable: true });
      if (claimed.kind !== 'acquired') assert.fail(`expected to acquire, got ${claimed.kind}`);
      clock.advance(5_000);
      assert.equal(await s.abandon(claimed.lease), true);
      const record = await stored(key, s);
      assertMatches(record, { status: RecordStatus.Abandoned, expiresAt: Math.ceil(clock.now() / 1000) + 3600 });
      assert.equal(record?.recoverAt, undefined, 'out of the recovery set');
      assert.equal((await s.claim(key, 'other')).kind, 'mismatch');
      assertMatches(await s.claim(key, 'fp'), {
        kind: 'acquired',
        lease: { takeover: true, downstreamKey: claimed.lease.downstreamKey },
      });
    });

    it('never abandons a claim it does not own', async () => {
      const clock = new ManualClock(Date.now());
      const s = store(clock);
      const key = newKey();
      const stale = await acquire(s, key);
      clock.advance(LEASE_MS + 1);
      const current = await acquire(s, key);
      assert.equal(await s.abandon(stale), false);
      assertMatches(await stored(key, s), { status: RecordStatus.InProgress, leaseToken: current.leaseToken });
    });
  });
}
