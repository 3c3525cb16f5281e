import assert from 'node:assert/strict';
import { LeaseLostError } from '../../engine/errors.js';
import { RecordStatus } from '../../engine/record.js';
import { ManualClock } from '../manual-clock.js';
import { assertMatches, rejection } from '../match.js';
import { acquire, type Contract, created, LEASE_MS, newKey } from './context.js';

/** The commit with nothing staged (a completion): one write, as a transaction would, fenced the same. */
export function describeCompletion<TEffect>(contract: Contract<TEffect>): void {
  const { describe, it, store, stored, countingIt, faultIt, faultyStore, loseReplies } = contract;
  describe('commit with nothing staged', () => {
    countingIt('is one round trip, and replays', async (counter) => {
      const s = store();
      const key = newKey();
      const first = await acquire(s, key);
      counter.reset();
      await s.commit(first, created);
      assert.equal(counter.count, 1);
      assertMatches(await s.claim(key, 'fp'), { kind: 'replay', response: created });
    });

    it('completes the record as a transaction would: out of the recovery set, kept a full TTL from the commit', async () => {
      const clock = new ManualClock(Date.now());
      const s = store(clock, { ttlSeconds: 3600 });
      const key = newKey();
      const claimed = await s.claim(key, 'fp', { recoverable: true });
      if (claimed.kind !== 'acquired') assert.fail(`expected to acquire, got ${claimed.kind}`);
      clock.advance(20_000);
      await s.commit(claimed.lease, created);
      const record = await stored(key, s);
      assertMatches(record, {
        status: RecordStatus.Completed,
        leaseToken: claimed.lease.leaseToken,
        response: created,
        expiresAt: Math.ceil(clock.now() / 1000) + 3600,
      });
      assert.equal(record?.recoverAt, undefined, 'out of the recovery set');
    });

    faultIt('recognises its own completion when the client sends again a completion whose reply was lost', async () => {
      const s = faultyStore();
      const key = newKey();
      const claimed = await acquire(s, key);
      const lost = loseReplies('completion', key);
      await s.commit(claimed, created);
      assert.equal(lost.fired(), 1);
      assertMatches(await s.claim(key, 'fp'), { kind: 'replay', response: created });
    });

    faultIt('recognises its own completion when the caller commits again after the client gave up', async () => {
      const s = faultyStore({ attempts: 2 });
      const key = newKey();
      const claimed = await acquire(s, key);
      const lost = loseReplies('completion', key, 2);
      await rejection(s.commit(claimed, created));
      assert.equal(lost.fired(), 2);
      await s.commit(claimed, created);
      assertMatches(await s.claim(key, 'fp'), { kind: 'replay', response: created });
    });

    it('rejects a stale owner, even once the owner that took over has completed the record', async () => {
      const clock = new ManualClock();
      const s = store(clock);
      const key = newKey();
      const stale = await acquire(s, key);
      clock.advance(LEASE_MS + 1);
      const current = await acquire(s, key);

      await assert.rejects(s.commit(stale, created), LeaseLostError);
      await s.commit(current, { ...created, body: '{"id":"pay_current"}' });
      // Completed, but under another lease token: not this owner's completion.
      const late = await rejection(s.commit(stale, created));
      assert.ok(late instanceof LeaseLostError, `expected LeaseLostError, got ${String(late)}`);
      assertMatches(late.record, { leaseToken: current.leaseToken });
      assertMatches(await s.claim(key, 'fp'), { kind: 'replay', response: { body: '{"id":"pay_current"}' } });
    });
  });
}
