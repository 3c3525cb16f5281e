import assert from 'node:assert/strict';
import type { IdempotencyStore } from '../../engine/contract.js';
import { ManualClock } from '../manual-clock.js';
import { acquireRecoverable, type Contract, created, LEASE_MS, newKey } from './context.js';

/** findDue, the recovery set: what is due and when, oldest first, out once committed. */
export function describeFindDue<TEffect>(contract: Contract<TEffect>): void {
  const { h, describe, it, store } = contract;
  describe('findDue (the recovery set)', () => {
    // Every case reads with a limit far above what a test table holds, and keeps to its own keys: other cases'
    // records share the table. Clocks start at the real now (DynamoDB Local's TTL sweeper works in wall-clock time).
    const dueKeys = async (s: IdempotencyStore<TEffect>) => (await s.findDue({ limit: 1000 })).map((due) => due.key);
    /**
     * An index may be eventually consistent (DynamoDB's is): wait until the set reflects the record's latest write,
     * seen through a clock far ahead, before asking what is due now, so that "not due yet" never passes merely
     * because the index had not caught up.
     */
    const settled = async (key: string, inSet: boolean): Promise<void> => {
      const farAhead = store(new ManualClock(Date.UTC(2100, 0, 1)));
      const deadline = Date.now() + 5000;
      while ((await dueKeys(farAhead)).includes(key) !== inSet) {
        if (Date.now() > deadline) assert.fail(`the recovery set never ${inSet ? 'showed' : 'dropped'} ${key}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };

    it('lists an in-progress operation once its lease has run out, and not before', async () => {
      const clock = new ManualClock(Date.now());
      const s = store(clock);
      const key = newKey();
      assert.equal((await acquireRecoverable(s, key)).recoverable, true);
      await settled(key, true);
      clock.advance(LEASE_MS - 1);
      assert.equal((await dueKeys(s)).includes(key), false);
      clock.advance(1);
      assert.equal((await dueKeys(s)).includes(key), true);
    });

    it('lists a released operation a lease after its release: time for its client to come back first', async () => {
      const clock = new ManualClock(Date.now());
      const s = store(clock);
      const key = newKey();
      const lease = await acquireRecoverable(s, key);
      clock.advance(1000);
      assert.equal(await s.release(lease), true);
      await settled(key, true);
      clock.advance(LEASE_MS - 1);
      assert.equal((await dueKeys(s)).includes(key), false);
      clock.advance(1);
      assert.equal((await dueKeys(s)).includes(key), true);
    });

    it('drops an operation from the set when it commits, and never lists one claimed without recovery', async () => {
      const clock = new ManualClock(Date.now());
      const s = store(clock);
      const committed = newKey();
      const plain = newKey();
      const lease = await acquireRecoverable(s, committed);
      await settled(committed, true);
      await s.commit(lease, created);
      const outcome = await s.claim(plain, 'fp');
      if (outcome.kind !== 'acquired') assert.fail(`expected to acquire ${plain}, got ${outcome.kind}`);
      assert.equal(outcome.lease.recoverable, false);
      await s.release(outcome.lease);
      // A recoverable claim made after both: once it shows, the set has caught up with them.
      const control = newKey();
      await acquireRecoverable(s, control);
      await settled(control, true);
      await settled(committed, false);
      clock.advance(10 * LEASE_MS);
      const due = await dueKeys(s);
      assert.deepEqual(
        [committed, plain, control].map((key) => due.includes(key)),
        [false, false, true],
      );
    });

    it('tells when each is due, and when it was first due: a lease after its first claim, never later', async () => {
      const clock = new ManualClock(Date.now());
      const s = store(clock);
      const released = newKey();
      const releasedAt = clock.now();
      const lease = await acquireRecoverable(s, released);
      clock.advance(1000);
      assert.equal(await s.release(lease), true);
      const running = newKey();
      const runningAt = clock.now();
      await acquireRecoverable(s, running);
      for (const key of [released, running]) await settled(key, true);
      clock.advance(3 * LEASE_MS);
      const operations = [
        { key: released, createdAt: releasedAt, recoverAt: releasedAt + 1000 + LEASE_MS },
        { key: running, createdAt: runningAt, recoverAt: runningAt + LEASE_MS },
      ];
      // Read by this store, and by one with a longer lease than the claims had: never first due after it was due.
      for (const leaseMs of [LEASE_MS, 2 * LEASE_MS]) {
        const reader = h.store({ clock, leaseSeconds: leaseMs / 1000 });
        const due = new Map((await reader.findDue({ limit: 1000 })).map((d) => [d.key, d]));
        for (const { key, createdAt, recoverAt } of operations) {
          const found = due.get(key);
          assert.equal(found?.recoverAt, recoverAt, `${key}: recoverAt`);
          // Optional: a store whose recovery index holds no creation time leaves it out.
          if (found?.firstDueAt === undefined) continue;
          assert.equal(
            found.firstDueAt,
            Math.min(recoverAt, createdAt + leaseMs),
            `${key}: firstDueAt (${leaseMs} ms)`,
          );
        }
      }
    });

    it('answers oldest first, within its limit', async () => {
      const clock = new ManualClock(Date.now());
      const s = store(clock);
      const keys = [newKey(), newKey(), newKey()];
      for (const key of keys) {
        await acquireRecoverable(s, key);
        clock.advance(10);
      }
      for (const key of keys) await settled(key, true);
      clock.advance(LEASE_MS);
      const due = (await s.findDue({ limit: 1000 })).filter((d) => keys.includes(d.key));
      assert.deepEqual(
        due.map((d) => d.key),
        keys,
      );
      assert.ok(due.every((d, i) => i === 0 || d.recoverAt >= (due[i - 1]?.recoverAt ?? 0)));
      assert.equal((await s.findDue({ limit: 2 })).length, 2);
    });
  });
}
