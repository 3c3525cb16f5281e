import assert from 'node:assert/strict';
import { RecordStatus } from '../../engine/record.js';
import { ManualClock } from '../manual-clock.js';
import { assertMatches, rejection } from '../match.js';
import { acquire, type Contract, created, LEASE_MS, newKey } from './context.js';

/** Claims, takeovers, commits and releases whose reply was lost: each recognised as the caller's own. */
export function describeLostReplies<TEffect>(contract: Contract<TEffect>): void {
  const { h, describe, store, stored, faultIt, faultyStore, loseReplies } = contract;
  describe('a write whose reply is lost', () => {
    faultIt('recognizes its own claim when the client sends again a claim that already landed', async () => {
      const key = newKey();
      const lost = loseReplies('claim', key);
      const s = faultyStore();
      const outcome = await s.claim(key, 'fp');
      assert.equal(lost.fired(), 1);
      assertMatches(outcome, { kind: 'acquired', lease: { attempt: 1, takeover: false } });
      if (outcome.kind === 'acquired') assert.equal((await stored(key, s))?.leaseToken, outcome.lease.leaseToken);
    });

    faultIt('recognizes its own takeover when the client sends again a takeover that already landed', async () => {
      const clock = new ManualClock();
      const key = newKey();
      const first = await acquire(store(clock), key);
      clock.advance(LEASE_MS + 1);
      const lost = loseReplies('takeover', key);
      const outcome = await faultyStore({ clock }).claim(key, 'fp');
      assert.equal(lost.fired(), 1);
      assertMatches(outcome, { kind: 'acquired', lease: { takeover: true, downstreamKey: first.downstreamKey } });
    });

    faultIt('commits once when the client sends again a commit whose reply was lost', async () => {
      const s = faultyStore();
      const key = newKey();
      const claimed = await acquire(s, key);
      const lost = loseReplies('commit', key);
      await s.commit(claimed, created, [h.effect(key, 'once')]);
      assert.equal(lost.fired(), 1);
      assert.equal(await h.rowsUnder(key), 1);
      assertMatches(await s.claim(key, 'fp'), { kind: 'replay', response: created });
    });

    faultIt('commits once when the caller commits again after the client gave up', async () => {
      const s = faultyStore({ attempts: 1 });
      const key = newKey();
      const claimed = await acquire(s, key);
      const lost = loseReplies('commit', key);
      await rejection(s.commit(claimed, created, [h.effect(key, 'once')]));
      assert.equal(lost.fired(), 1);
      await s.commit(claimed, created, [h.effect(key, 'once')]);
      assert.equal(await h.rowsUnder(key), 1);
      assertMatches(await s.claim(key, 'fp'), { kind: 'replay', response: created });
    });

    faultIt('recognizes its own release when sent again', async () => {
      const s = faultyStore();
      const key = newKey();
      const claimed = await acquire(s, key);
      const lost = loseReplies('release', key);
      assert.equal(await s.release(claimed), true);
      assert.equal(lost.fired(), 1);
      assert.equal((await s.get(key))?.status, RecordStatus.Released);
    });
  });
}
