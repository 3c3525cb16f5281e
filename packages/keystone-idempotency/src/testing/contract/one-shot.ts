import assert from 'node:assert/strict';
import { EffectConditionFailedError } from '../../engine/errors.js';
import { RecordStatus } from '../../engine/record.js';
import { ManualClock } from '../manual-clock.js';
import { assertMatches, rejection } from '../match.js';
import { acquire, type Contract, created, LEASE_MS, landed, newKey } from './context.js';

/** claimAndCommit: claim, effects and completion in one write. */
export function describeOneShot<TEffect>(contract: Contract<TEffect>): void {
  const { h, describe, it, store, stored, countingIt, faultIt, faultyStore, loseReplies } = contract;
  describe('claimAndCommit (one-shot local work)', () => {
    const build = (key: string, id: string) => async () => ({ response: created, effects: [h.effect(key, id)] });

    it('commits claim, effect and completion', async () => {
      const s = store();
      const key = newKey();
      assert.equal((await s.claimAndCommit(key, 'fp', build(key, 'p1'))).kind, 'committed');
      assert.equal(await h.rowsUnder(key), 1);
    });

    countingIt('commits claim, effect and completion in one round trip', async (counter) => {
      const s = store();
      const key = newKey();
      counter.reset();
      assert.equal((await s.claimAndCommit(key, 'fp', build(key, 'p1'))).kind, 'committed');
      assert.equal(counter.count, 1);
      assert.equal(await h.rowsUnder(key), 1);
    });

    it('answers a duplicate with a replay, or a mismatch for another fingerprint, writing nothing', async () => {
      const s = store();
      const key = newKey();
      await s.claimAndCommit(key, 'fp', build(key, 'p1'));
      assertMatches(await s.claimAndCommit(key, 'fp', build(key, 'p2')), { kind: 'replay', response: created });
      assert.equal((await s.claimAndCommit(key, 'other', build(key, 'p3'))).kind, 'mismatch');
      assert.equal(await h.rowsUnder(key), 1);
    });

    countingIt('answers a duplicate from that same round trip', async (counter) => {
      const s = store();
      const key = newKey();
      await s.claimAndCommit(key, 'fp', build(key, 'p1'));
      counter.reset();
      assertMatches(await s.claimAndCommit(key, 'fp', build(key, 'p2')), { kind: 'replay', response: created });
      assert.equal(counter.count, 1);
    });

    it('makes exactly one effect out of 50 concurrent attempts', async () => {
      const s = store();
      const key = newKey();
      const outcomes = await Promise.all(
        Array.from({ length: 50 }, (_, i) => s.claimAndCommit(key, 'fp', build(key, `p${i}`))),
      );
      assert.equal(outcomes.filter((o) => o.kind === 'committed').length, 1);
      assert.ok(outcomes.every((o) => o.kind === 'committed' || o.kind === 'replay'));
      assert.equal(await h.rowsUnder(key), 1);
    });

    it('completes a released record, reusing its downstream key', async () => {
      const s = store();
      const key = newKey();
      const claimed = await acquire(s, key);
      await s.release(claimed);
      const outcome = await s.claimAndCommit(key, 'fp', build(key, 'p1'));
      assertMatches(outcome, { kind: 'committed', downstreamKey: claimed.downstreamKey });
      assertMatches(await stored(key, s), { status: RecordStatus.Completed, attempt: 2 });
    });

    it('refuses a one-shot takeover that a late commit beat, writing nothing', async () => {
      const clock = new ManualClock(Date.now());
      const s = store(clock);
      const key = newKey();
      const slow = await acquire(s, key);
      clock.advance(LEASE_MS + 1);
      let late: Promise<boolean> | undefined;
      const outcome = await s.claimAndCommit(key, 'fp', async ({ attempt }) => {
        // Built for the takeover (attempt 2): the record has been read, the takeover not yet written. The slow
        // owner's commit lands now, and the takeover must meet it.
        if (attempt === 2) late ??= landed(s.commit(slow, created, [h.effect(key, 'late')]));
        await late;
        return { response: { ...created, body: '{"id":"pay_one_shot"}' }, effects: [h.effect(key, 'one-shot')] };
      });
      assert.equal(await late, true, 'the late commit landed');
      assertMatches(outcome, { kind: 'replay', response: created });
      assert.equal(await h.rowsUnder(key), 1);
    });

    it('reports in flight while a two-phase owner holds the key, writing nothing', async () => {
      const s = store();
      const key = newKey();
      await s.claim(key, 'fp');
      assert.equal((await s.claimAndCommit(key, 'fp', build(key, 'p1'))).kind, 'in_flight');
      assert.equal(await h.rowsUnder(key), 0);
    });

    it('writes nothing when one of its effects fails its own condition', async () => {
      const s = store();
      for (const index of [0, 1, 2]) {
        const key = newKey();
        const effects = [h.effect(key, 'p'), h.effect(key, 'q')];
        effects.splice(index, 0, h.blockedEffect());
        const error = await rejection(s.claimAndCommit(key, 'fp', async () => ({ response: created, effects })));
        assert.ok(error instanceof EffectConditionFailedError, `expected EffectConditionFailedError, got ${error}`);
        assert.equal(error.index, index);
        assert.equal(await h.rowsUnder(key), 0);
        assert.equal(await stored(key, s), undefined);
      }
    });

    faultIt('commits once when the client sends again a one-shot commit whose reply was lost', async () => {
      const s = faultyStore();
      const key = newKey();
      const lost = loseReplies('commit', key);
      assertMatches(await s.claimAndCommit(key, 'fp', build(key, 'once')), { kind: 'committed' });
      assert.equal(lost.fired(), 1);
      assert.equal(await h.rowsUnder(key), 1);
    });
  });
}
