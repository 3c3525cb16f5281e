import assert from 'node:assert/strict';
import type { IdempotencyStore } from '../../engine/contract.js';
import { LeaseLostError } from '../../engine/errors.js';
import { RecordStatus } from '../../engine/record.js';
import { ManualClock } from '../manual-clock.js';
import { assertMatches } from '../match.js';
import { acquire, acquireRecoverable, type Contract, created, newKey } from './context.js';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/**
 * Expiry and clocks: a record lives to the millisecond its expiry says, judged by the store's clock alone (never the
 * database's), an owner whose record expired under it is fenced out, and unfinished recoverable work never expires,
 * however far the clock goes.
 */
export function describeExpiry<TEffect>(contract: Contract<TEffect>): void {
  const { h, describe, it, store, stored } = contract;
  describe('expiry and clocks', () => {
    /** The record's expiry as stored, in ms. */
    const expiryOf = async (key: string, s: IdempotencyStore<TEffect>): Promise<number> => {
      const expiresAt = (await stored(key, s))?.expiresAt;
      if (expiresAt === undefined) assert.fail(`${key} has no expiry`);
      return expiresAt * 1000;
    };

    it('replays a completed record up to the millisecond before its expiry, and treats it as new from then', async () => {
      // Clocks start at the real now: DynamoDB Local's TTL sweeper deletes what is past in wall-clock time.
      const clock = new ManualClock(Date.now());
      const s = store(clock, { ttlSeconds: 60 });
      const key = newKey();
      const first = await acquire(s, key);
      await s.commit(first, created);
      clock.advance((await expiryOf(key, s)) - 1 - clock.now());
      assertMatches(await s.claim(key, 'fp'), { kind: 'replay', response: created });
      clock.advance(1);
      assertMatches(await s.claim(key, 'fp'), {
        kind: 'acquired',
        lease: { takeover: false, attempt: 1 },
      });
    });

    it('judges expiry by the store’s clock, never the database’s: a store an hour ahead of it', async () => {
      // Every time a write's condition uses is the engine's `now`: with the store's clock an hour ahead of the
      // database's, a record past its expiry by the store's clock is free, although the database's own clock
      // (an hour behind) would still call it live.
      const clock = new ManualClock(Date.now() + HOUR_MS);
      const s = store(clock, { ttlSeconds: 60 });
      const key = newKey();
      const first = await acquire(s, key);
      await s.commit(first, created);
      clock.advance(61_000);
      const again = await s.claim(key, 'fp');
      assertMatches(again, { kind: 'acquired', lease: { takeover: false, attempt: 1 } });
      if (again.kind === 'acquired') assert.notEqual(again.lease.downstreamKey, first.downstreamKey);
    });

    it('fences out an owner whose claim expired under it: the new generation’s effect alone is written', async () => {
      const clock = new ManualClock(Date.now());
      const s = store(clock, { ttlSeconds: 60 });
      const key = newKey();
      const slow = await acquire(s, key);
      clock.advance((await expiryOf(key, s)) - clock.now());
      const fresh = await acquire(s, key);
      assert.notEqual(fresh.downstreamKey, slow.downstreamKey, 'a new generation, under a new downstream key');
      await assert.rejects(s.commit(slow, created, [h.effect(key, 'slow')]), LeaseLostError);
      assert.equal(await s.release(slow), false);
      await s.commit(fresh, created, [h.effect(key, 'fresh')]);
      assert.equal(await h.rowsUnder(key), 1);
      assertMatches(await stored(key, s), { status: RecordStatus.Completed, leaseToken: fresh.leaseToken });
    });

    it('never frees, expires or drops unfinished recoverable work, 30 days past any TTL', async () => {
      const clock = new ManualClock(Date.now());
      const s = store(clock, { ttlSeconds: 60 });
      const crashed = newKey();
      const released = newKey();
      const owner = await acquireRecoverable(s, crashed);
      const gaveBack = await acquireRecoverable(s, released);
      assert.equal(await s.release(gaveBack), true);
      clock.advance(30 * DAY_MS);
      for (const key of [crashed, released]) {
        const record = await stored(key, s);
        assert.equal(record?.expiresAt, undefined, `${key}: unfinished recoverable work carries no expiry`);
        assert.notEqual(record?.recoverAt, undefined, `${key}: still in the recovery set`);
      }
      assertMatches(await s.get(crashed), { status: RecordStatus.InProgress, downstreamKey: owner.downstreamKey });
      assertMatches(await s.get(released), { status: RecordStatus.Released, downstreamKey: gaveBack.downstreamKey });
      // The set may be eventually consistent (DynamoDB's index is): wait, within a bound, for both to show.
      const deadline = Date.now() + 5000;
      for (;;) {
        const due = (await s.findDue({ limit: 1000 })).map((d) => d.key);
        if (due.includes(crashed) && due.includes(released)) break;
        if (Date.now() > deadline) assert.fail(`findDue 30 days on lists neither ${crashed} nor ${released}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // A late retry and recovery each take one over under its downstream key, never as a fresh generation.
      const retried = await s.claim(crashed, 'fp');
      assertMatches(retried, { kind: 'acquired', lease: { takeover: true, downstreamKey: owner.downstreamKey } });
      const resumed = await s.resume(released);
      assertMatches(resumed, { kind: 'acquired', lease: { takeover: true, downstreamKey: gaveBack.downstreamKey } });
      if (retried.kind !== 'acquired' || resumed.kind !== 'acquired') assert.fail('expected both taken over');
      await s.commit(retried.lease, created, [h.effect(crashed, 'once')]);
      await s.commit(resumed.lease, created, [h.effect(released, 'once')]);
      assert.equal(await h.rowsUnder(crashed), 1);
      assert.equal(await h.rowsUnder(released), 1);
    });
  });
}
