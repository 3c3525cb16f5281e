import assert from 'node:assert/strict';
import { LeaseLostError } from '../../engine/errors.js';
import { RecordStatus } from '../../engine/record.js';
import { ManualClock } from '../manual-clock.js';
import { assertMatches, rejection } from '../match.js';
import { acquire, type Contract, created, LEASE_MS, newKey } from './context.js';

/** Takeovers of a lease that ran out: one winner, the downstream key kept, the stale owner fenced out. */
export function describeTakeover<TEffect>(contract: Contract<TEffect>): void {
  const { h, describe, it, store } = contract;
  describe('takeover', () => {
    it('gives an expired lease to exactly one of two concurrent takers, keeping the downstream key', async () => {
      const clock = new ManualClock();
      const s = store(clock);
      const key = newKey();
      const dead = await acquire(s, key);
      clock.advance(LEASE_MS + 1);
      const [one, two] = await Promise.all([s.claim(key, 'fp'), s.claim(key, 'fp')]);
      const winners = [one, two].filter((outcome) => outcome.kind === 'acquired');
      assert.equal(winners.length, 1);
      assert.deepEqual([one, two].map((o) => o.kind).sort(), ['acquired', 'in_flight']);
      const winner = winners[0];
      if (winner?.kind !== 'acquired') assert.fail('expected a winner');
      assert.equal(winner.lease.takeover, true);
      assert.equal(winner.lease.downstreamKey, dead.downstreamKey);
      assert.notEqual(winner.lease.leaseToken, dead.leaseToken);
      assert.equal(winner.lease.attempt, 2);
    });

    it('rejects the stale owner’s commit after a takeover and writes none of its effects', async () => {
      const clock = new ManualClock();
      const s = store(clock);
      const key = newKey();
      const stale = await acquire(s, key);
      clock.advance(LEASE_MS + 1);
      const current = await acquire(s, key);

      await assert.rejects(s.commit(stale, created, [h.effect(key, 'stale')]), LeaseLostError);
      assert.equal(await h.rowsUnder(key), 0);

      await s.commit(current, created, [h.effect(key, 'current')]);
      assert.equal(await h.rowsUnder(key), 1);
      await assert.rejects(s.commit(stale, created, [h.effect(key, 'late')]), LeaseLostError);
      assert.equal(await h.rowsUnder(key), 1);
    });

    it('tells the stale owner, as a typed field, the record that fenced it', async () => {
      const clock = new ManualClock();
      const s = store(clock);
      const key = newKey();
      const stale = await acquire(s, key);
      clock.advance(LEASE_MS + 1);
      const current = await acquire(s, key);

      const error = await rejection(s.commit(stale, created, [h.effect(key, 'stale')]));
      assert.ok(error instanceof LeaseLostError, `expected LeaseLostError, got ${String(error)}`);
      assertMatches(error.record, {
        key,
        status: RecordStatus.InProgress,
        leaseToken: current.leaseToken,
        attempt: 2,
      });
    });

    it('lets a slow owner whose lease ran out still commit when nobody took over', async () => {
      const clock = new ManualClock();
      const s = store(clock);
      const key = newKey();
      const slow = await acquire(s, key);
      clock.advance(LEASE_MS * 1.5);
      await s.commit(slow, created, [h.effect(key, 'slow')]);
      assertMatches(await s.claim(key, 'fp'), { kind: 'replay' });
    });
  });
}
