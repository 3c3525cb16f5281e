import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { scopedKey } from '../../engine/key.js';
import { ManualClock } from '../manual-clock.js';
import { assertMatches } from '../match.js';
import { acquire, type Contract, created, LEASE_MS, newKey } from './context.js';

/** The claim: one winner of a race, replays, mismatches, expiry, waits, and the lease it holds. */
export function describeClaim<TEffect>(contract: Contract<TEffect>): void {
  const { h, describe, it, store, countingIt } = contract;
  describe('claim', () => {
    it('lets exactly one of 50 concurrent claims win, and exactly one effect commit', async () => {
      const key = newKey();
      const s = store();
      const outcomes = await Promise.all(
        Array.from({ length: 50 }, async (_, i) => {
          const outcome = await s.claim(key, 'fp');
          if (outcome.kind === 'acquired') await s.commit(outcome.lease, created, [h.effect(key, `p${i}`)]);
          return outcome.kind;
        }),
      );
      assert.equal(outcomes.filter((kind) => kind === 'acquired').length, 1);
      assert.deepEqual(
        outcomes.filter((kind) => kind !== 'acquired' && kind !== 'in_flight' && kind !== 'replay'),
        [],
      );
      assert.equal(await h.rowsUnder(key), 1);
    });

    countingIt('replays a completed record in one round trip', async (counter) => {
      const key = newKey();
      const s = store();
      const first = await acquire(s, key);
      await s.commit(first, created);
      counter.reset();
      const replay = await s.claim(key, 'fp');
      assertMatches(replay, { kind: 'replay', response: created });
      assert.equal(counter.count, 1);
    });

    countingIt('costs one round trip for a first claim and one for an in-flight duplicate', async (counter) => {
      const key = newKey();
      const s = store();
      counter.reset();
      assert.equal((await s.claim(key, 'fp')).kind, 'acquired');
      assert.equal((await s.claim(key, 'fp')).kind, 'in_flight');
      assert.equal(counter.count, 2);
    });

    it('reports a mismatch for the same key with another fingerprint, in flight or completed', async () => {
      const key = newKey();
      const s = store();
      const first = await acquire(s, key);
      assert.equal((await s.claim(key, 'other')).kind, 'mismatch');
      await s.commit(first, created);
      assert.equal((await s.claim(key, 'other')).kind, 'mismatch');
    });

    it('keeps two accounts using the same client key apart', async () => {
      const clientKey = randomUUID();
      const s = store();
      const a = scopedKey({ accountId: 'acct_a', operation: 'POST /payments', key: clientKey });
      const b = scopedKey({ accountId: 'acct_b', operation: 'POST /payments', key: clientKey });
      const claimA = await acquire(s, a);
      await s.commit(claimA, created);
      const claimB = await s.claim(b, 'other-body');
      assert.equal(claimB.kind, 'acquired');
      if (claimB.kind === 'acquired') assert.notEqual(claimB.lease.downstreamKey, claimA.downstreamKey);
    });

    it('treats a record past its expiry as new, with a new downstream key, even before it is deleted', async () => {
      const clock = new ManualClock();
      const s = store(clock, { ttlSeconds: 60 });
      const key = newKey();
      const first = await acquire(s, key);
      await s.commit(first, created);
      clock.advance(61_000);
      assert.equal(await s.get(key), undefined);
      if (h.stored) assert.notEqual(await h.stored(key), undefined, 'the database still holds the record');
      const again = await s.claim(key, 'a different body is fine after expiry');
      assert.equal(again.kind, 'acquired');
      if (again.kind === 'acquired') {
        assert.notEqual(again.lease.downstreamKey, first.downstreamKey);
        assert.equal(again.lease.takeover, false);
        assert.equal(again.lease.attempt, 1);
      }
    });

    it('waits for an in-flight original when asked, and replays its result', async () => {
      const key = newKey();
      const s = store(new ManualClock());
      const first = await acquire(s, key);
      setTimeout(() => void s.commit(first, created), 150);
      const waited = await s.claim(key, 'fp', { waitMs: 3000 });
      assertMatches(waited, { kind: 'replay', response: created });
    });

    it('stops waiting at its bound and reports in flight', async () => {
      const key = newKey();
      const s = store();
      await s.claim(key, 'fp');
      const started = Date.now();
      assert.equal((await s.claim(key, 'fp', { waitMs: 300 })).kind, 'in_flight');
      // The owner never finishes (its clock stands still): only the bound ends the wait, long before this.
      assert.ok(Date.now() - started < 10_000);
    });

    it('holds a longer lease when asked, never a shorter one', async () => {
      const clock = new ManualClock();
      const s = store(clock);
      const longer = await s.claim(newKey(), 'fp', { leaseMs: 90_000 });
      const shorter = await s.claim(newKey(), 'fp', { leaseMs: 1_000 });
      assertMatches(longer, { kind: 'acquired', lease: { leaseExpiresAt: clock.now() + 90_000 } });
      assertMatches(shorter, { kind: 'acquired', lease: { leaseExpiresAt: clock.now() + LEASE_MS } });
    });
  });
}
