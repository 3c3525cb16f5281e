import assert from 'node:assert/strict';
import { LeaseLostError } from '../../engine/errors.js';
import { RecordStatus } from '../../engine/record.js';
import { ManualClock } from '../manual-clock.js';
import { assertMatches, rejection } from '../match.js';
import { acquire, type Contract, created, LEASE_MS, landed, newKey } from './context.js';

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

    it('refuses a takeover that a late commit beat: the completion and its one effect stay', async () => {
      // A retry reads the record (its owner's lease ran out) and decides to take it over; the slow owner's commit
      // lands before the takeover's write. The takeover must meet the completion (its lease token unchanged, its
      // status not) and replay it, never reopen it. Raced on ten keys: either may land first, never both win.
      const clock = new ManualClock(Date.now());
      const s = store(clock);
      const keys = Array.from({ length: 10 }, () => newKey());
      const slow = await Promise.all(keys.map((key) => acquire(s, key)));
      clock.advance(LEASE_MS + 1);
      const retried = { ...created, body: '{"id":"pay_retry"}' };
      await Promise.all(
        keys.map(async (key, i) => {
          const [retry, late] = await Promise.all([
            s.claim(key, 'fp'),
            landed(s.commit(slow[i]!, created, [h.effect(key, 'late')])),
          ]);
          if (retry.kind === 'acquired') {
            assert.equal(late, false, `${key}: the late commit and the takeover both won`);
            await s.commit(retry.lease, retried, [h.effect(key, 'retry')]);
          } else {
            assert.equal(late, true, `${key}: the takeover lost to nobody (${retry.kind})`);
            assertMatches(retry, { kind: 'replay', response: created });
          }
          assert.equal(await h.rowsUnder(key), 1, `${key}: one effect`);
          assertMatches(await s.claim(key, 'fp'), { kind: 'replay', response: late ? created : retried });
        }),
      );
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
