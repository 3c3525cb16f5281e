import { randomUUID } from 'node:crypto';
import type { IdempotencyStore } from '../../src/engine/contract';
import { LeaseLostError } from '../../src/engine/errors';
import { scopedKey } from '../../src/engine/key';
import { type Lease, RecordStatus, type StoredResponse } from '../../src/engine/record';
import { type RecoveryResolver, recoverDue } from '../../src/engine/recovery';
import { FakeClock } from '../support/fake-clock';
import { type HarnessStoreOptions, storeHarnesses } from '../support/stores';

/**
 * Recovery: operations whose effect lives elsewhere are tracked in a recovery set while unfinished (a sparse index on
 * DynamoDB, a partial index on PostgreSQL), so that an attempt whose client never comes back is finished (or given
 * up) by someone else, fenced like every owner. Run against both stores.
 */
const LEASE_MS = 30_000;
// Clocks start at the real now: DynamoDB Local's TTL sweeper deletes items whose expiry is past in wall-clock time.

const created: StoredResponse = { statusCode: 201, body: '{"id":"pay_1"}', headers: {} };
const newKey = () => scopedKey({ accountId: 'acct_r', operation: 'POST /payments', key: randomUUID() });

async function claimRecoverable(s: IdempotencyStore<unknown>, key: string): Promise<Lease> {
  const outcome = await s.claim(key, 'fp', { recoverable: true });
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

async function dueKeys(s: IdempotencyStore<unknown>): Promise<string[]> {
  return (await s.findDue({ limit: 1000 })).map((due) => due.key);
}

describe.each(storeHarnesses)('recovery on %s', (_name, harness) => {
  const h = harness();
  const store = (clock: FakeClock, ttlSeconds = 3600) => h.store({ clock, leaseSeconds: LEASE_MS / 1000, ttlSeconds });
  const paymentRow = (pk: string) => h.effect(pk, 'PAYMENT');

  /**
   * DynamoDB's indexes are eventually consistent (DynamoDB Local's looked immediate here, but that is not a
   * promise), so a test first waits until the recovery set reflects the record's latest write, seen through a clock
   * far ahead, and only then asks what is due now: "not due yet" must never pass merely because the index had not
   * caught up. (PostgreSQL's partial index is read in the same snapshot as the table: it has always caught up.)
   */
  async function settledIndex(
    key: string,
    inIndex: boolean,
    storeOn: (options: HarnessStoreOptions) => IdempotencyStore<unknown> = (options) => h.store(options),
  ): Promise<void> {
    const farAhead = storeOn({ clock: new FakeClock(Date.UTC(2100, 0, 1)) });
    const deadline = Date.now() + 5000;
    while ((await dueKeys(farAhead)).includes(key) !== inIndex) {
      if (Date.now() > deadline) throw new Error(`the index never ${inIndex ? 'showed' : 'dropped'} ${key}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  // findDue's own cases are in the published contract suite (describeStoreContract), run on both stores.

  describe('resume', () => {
    it('takes over a released operation under the same downstream key, and its commit lands once', async () => {
      const clock = new FakeClock(Date.now());
      const s = store(clock);
      const key = newKey();
      const original = await claimRecoverable(s, key);
      await s.release(original);
      const resumed = await s.resume(key);
      if (resumed.kind !== 'acquired') throw new Error(`expected to acquire, got ${resumed.kind}`);
      expect(resumed.lease.downstreamKey).toBe(original.downstreamKey);
      expect(resumed.lease.attempt).toBe(2);
      await s.commit(resumed.lease, created, [paymentRow(key)]);
      expect(await h.rowsUnder(key)).toBe(1);
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
    });

    it('leaves a live owner alone, reporting the time left on its lease', async () => {
      const clock = new FakeClock(Date.now());
      const s = store(clock);
      const key = newKey();
      await claimRecoverable(s, key);
      clock.advance(10_000);
      expect(await s.resume(key)).toMatchObject({ kind: 'in_flight', retryAfterMs: LEASE_MS - 10_000 });
    });

    it('fences out an owner whose lease ran out: its commit writes nothing, recovery’s lands', async () => {
      const clock = new FakeClock(Date.now());
      const s = store(clock);
      const key = newKey();
      const stale = await claimRecoverable(s, key);
      clock.advance(LEASE_MS);
      const resumed = await s.resume(key);
      if (resumed.kind !== 'acquired') throw new Error(`expected to acquire, got ${resumed.kind}`);
      await expect(s.commit(stale, created, [paymentRow(key)])).rejects.toBeInstanceOf(LeaseLostError);
      expect(await h.rowsUnder(key)).toBe(0);
      await s.commit(resumed.lease, created, [paymentRow(key)]);
      expect(await h.rowsUnder(key)).toBe(1);
    });

    it('gives a due operation to exactly one of two concurrent recoverers', async () => {
      const clock = new FakeClock(Date.now());
      const s = store(clock);
      const key = newKey();
      await claimRecoverable(s, key);
      clock.advance(LEASE_MS);
      const outcomes = await Promise.all([s.resume(key), s.resume(key)]);
      expect(outcomes.map((o) => o.kind).sort()).toEqual(['acquired', 'in_flight']);
    });

    it('reports a completed operation, a missing key, and another generation as nothing to resume', async () => {
      const clock = new FakeClock(Date.now());
      const s = store(clock);
      const done = newKey();
      await s.commit(await claimRecoverable(s, done), created);
      expect((await s.resume(done)).kind).toBe('completed');
      expect((await s.resume(newKey())).kind).toBe('absent');
      const released = newKey();
      await s.release(await claimRecoverable(s, released));
      expect((await s.resume(released, { downstreamKey: 'idk_some_other_generation' })).kind).toBe('absent');
    });

    it('keeps recovery’s own lease recoverable: if recovery dies, the operation stays due', async () => {
      const clock = new FakeClock(Date.now());
      const s = store(clock);
      const key = newKey();
      await s.release(await claimRecoverable(s, key));
      const resumed = await s.resume(key);
      if (resumed.kind !== 'acquired') throw new Error(`expected to acquire, got ${resumed.kind}`);
      expect(resumed.lease.recoverable).toBe(true);
      await settledIndex(key, true);
      clock.advance(LEASE_MS);
      expect(await dueKeys(s)).toContain(key);
    });
  });

  describe('recoverDue', () => {
    /** A table of its own: a run drains every due operation in its table, and other tests leave some behind. */
    async function ownStore(clock: FakeClock, ttlSeconds = 3600): Promise<IdempotencyStore<unknown>> {
      const storeOn = await h.isolatedStores();
      return storeOn({ clock, leaseSeconds: LEASE_MS / 1000, ttlSeconds });
    }

    it('drains every due operation in one run, page after page past its limit', async () => {
      const clock = new FakeClock(Date.now());
      const s = await ownStore(clock);
      const keys = Array.from({ length: 5 }, newKey);
      for (const key of keys) await claimRecoverable(s, key);
      clock.advance(LEASE_MS);
      const nothingCharged: RecoveryResolver<unknown> = async () => ({ kind: 'abandon' });
      const report = await recoverDue(s, nothingCharged, { limit: 2 });
      expect(report).toMatchObject({ due: 5, abandoned: 5, skipped: 0, failed: 0, left: 0 });
      expect(report.oldestDue).toBeUndefined();
      for (const key of keys) expect((await s.get(key))?.status).toBe(RecordStatus.Abandoned);
    });

    it('gets past an operation it cannot take over, however small its limit', async () => {
      const clock = new FakeClock(Date.now());
      const s = await ownStore(clock);
      const keys = [newKey(), newKey(), newKey()];
      for (const key of keys) {
        await claimRecoverable(s, key);
        clock.advance(10);
      }
      clock.advance(LEASE_MS);
      // The oldest is taken over by someone else between the index and recovery's own takeover: skipped, and still
      // listed as due by an index that has not caught up. The run must not stop at it.
      const stuck = await s.resume(keys[0]!);
      if (stuck.kind !== 'acquired') throw new Error(`expected to acquire, got ${stuck.kind}`);
      const findDue = s.findDue.bind(s);
      const laggingIndex = Object.assign(Object.create(s) as IdempotencyStore<unknown>, {
        findDue: async (options?: { limit?: number }) => {
          const due = await findDue({ limit: 1000 });
          return [{ key: keys[0]!, recoverAt: 0 }, ...due].slice(0, options?.limit ?? 100);
        },
      });
      const report = await recoverDue(laggingIndex, async () => ({ kind: 'abandon' }), { limit: 1 });
      expect(report).toMatchObject({ due: 3, skipped: 1, abandoned: 2 });
      for (const key of keys.slice(1)) expect((await s.get(key))?.status).toBe(RecordStatus.Abandoned);
    });

    it('reports an operation it retries run after run as ever older, from the first time it was due', async () => {
      const clock = new FakeClock(Date.now());
      const storeOn = await h.isolatedStores();
      const s = storeOn({ clock, leaseSeconds: LEASE_MS / 1000, ttlSeconds: 3600 });
      const key = newKey();
      const claimedAt = clock.now();
      await claimRecoverable(s, key);
      const processorDown: RecoveryResolver<unknown> = async () => ({ kind: 'retry', reason: 'processor down' });
      const ages: number[] = [];
      for (let run = 0; run < 3; run++) {
        clock.advance(LEASE_MS);
        await settledIndex(key, true, storeOn);
        const report = await recoverDue(s, processorDown);
        expect(report).toMatchObject({ due: 1, retried: 1 });
        expect(report.oldestDue).toMatchObject({ key, firstDueAt: claimedAt + LEASE_MS });
        ages.push(clock.now() - report.oldestDue!.firstDueAt);
      }
      expect(ages).toEqual([0, LEASE_MS, 2 * LEASE_MS]);
    });

    it('reports one released again and again, and left due, as first due a lease after its first claim', async () => {
      const clock = new FakeClock(Date.now());
      const storeOn = await h.isolatedStores();
      const s = storeOn({ clock, leaseSeconds: LEASE_MS / 1000, ttlSeconds: 3600 });
      const key = newKey();
      const claimedAt = clock.now();
      await s.release(await claimRecoverable(s, key));
      for (let retry = 0; retry < 3; retry++) {
        clock.advance(LEASE_MS);
        const resumed = await s.resume(key);
        if (resumed.kind !== 'acquired') throw new Error(`expected to acquire, got ${resumed.kind}`);
        await s.release(resumed.lease);
      }
      clock.advance(LEASE_MS);
      await settledIndex(key, true, storeOn);
      // A run out of time before it took anything: what it says comes from the recovery set and the record alone.
      const report = await recoverDue(s, async () => ({ kind: 'abandon' }), { shouldStop: () => true });
      expect(report).toMatchObject({ due: 0, left: 0 });
      expect(report.oldestDue).toEqual({
        key,
        recoverAt: claimedAt + 4 * LEASE_MS, // moved on a lease by every release
        firstDueAt: claimedAt + LEASE_MS,
      });
    });

    it('stops taking operations when told to, and reports the oldest one it left due', async () => {
      const clock = new FakeClock(Date.now());
      const s = await ownStore(clock);
      const keys = [newKey(), newKey(), newKey()];
      for (const key of keys) {
        await claimRecoverable(s, key);
        clock.advance(10);
      }
      clock.advance(LEASE_MS);
      let taken = 0;
      const report = await recoverDue(
        s,
        async () => {
          taken += 1;
          return { kind: 'abandon' };
        },
        { limit: 100, concurrency: 1, shouldStop: () => taken >= 1 },
      );
      expect(report).toMatchObject({ due: 3, abandoned: 1, left: 2 });
      expect(report.oldestDue?.key).toBe(keys[1]);
      expect(await dueKeys(s)).toEqual(keys.slice(1));
    });
  });

  describe('an unfinished recoverable operation', () => {
    const TTL_SECONDS = 60;
    const pastTtl = (TTL_SECONDS + 1) * 1000; // expiry is in whole seconds, rounded up

    it('is taken over past its TTL by a late retry, under its downstream key: never claimed fresh', async () => {
      const clock = new FakeClock(Date.now());
      const s = store(clock, TTL_SECONDS);
      const key = newKey();
      const original = await claimRecoverable(s, key);
      await s.release(original);
      clock.advance(pastTtl);
      const late = await s.claim(key, 'fp', { recoverable: true });
      if (late.kind !== 'acquired') throw new Error(`expected to acquire, got ${late.kind}`);
      expect(late.lease).toMatchObject({ takeover: true, attempt: 2, downstreamKey: original.downstreamKey });
      // A different body is still a different request: the key is not free.
      expect((await s.claim(key, 'another body')).kind).toBe('mismatch');
    });

    it('is resumed past its TTL: a completer that fell behind by more than the TTL still finishes it', async () => {
      const clock = new FakeClock(Date.now());
      const s = store(clock, TTL_SECONDS);
      const key = newKey();
      const crashed = await claimRecoverable(s, key);
      clock.advance(10 * pastTtl);
      expect(await s.get(key)).toMatchObject({ status: RecordStatus.InProgress, downstreamKey: crashed.downstreamKey });
      expect(await dueKeys(s)).toContain(key);
      const resumed = await s.resume(key);
      if (resumed.kind !== 'acquired') throw new Error(`expected to acquire, got ${resumed.kind}`);
      expect(resumed.lease.downstreamKey).toBe(crashed.downstreamKey);
      await s.commit(resumed.lease, created, [paymentRow(key)]);
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
    });

    it('keeps living when the completer could not finish it, run after run, past its TTL', async () => {
      const clock = new FakeClock(Date.now());
      const storeOn = await h.isolatedStores();
      const s = storeOn({ clock, leaseSeconds: LEASE_MS / 1000, ttlSeconds: TTL_SECONDS });
      const key = newKey();
      await s.release(await claimRecoverable(s, key));
      const processorDown: RecoveryResolver<unknown> = async () => ({ kind: 'retry', reason: 'processor down' });
      // Each run comes a little after the last one's release became due: a completer that is always behind.
      for (let run = 0; run < 4; run++) {
        clock.advance(LEASE_MS + 2_000);
        expect(await recoverDue(s, processorDown)).toMatchObject({ due: 1, retried: 1 });
      }
      expect(4 * LEASE_MS).toBeGreaterThan(pastTtl);
      expect(await s.get(key)).toMatchObject({ status: RecordStatus.Released });
      clock.advance(LEASE_MS);
      expect(await recoverDue(s, async () => ({ kind: 'abandon' }))).toMatchObject({ due: 1, abandoned: 1 });
    });

    it('carries no expiry while unfinished, so no deletion takes it; commit and abandon give it a full TTL', async () => {
      const clock = new FakeClock(Date.now());
      const s = store(clock, TTL_SECONDS);
      const committed = newKey();
      const lease = await claimRecoverable(s, committed);
      expect((await h.stored(committed))?.expiresAt).toBeUndefined();
      await s.release(lease);
      expect((await h.stored(committed))?.expiresAt).toBeUndefined();
      clock.advance(10 * pastTtl);
      const resumed = await s.resume(committed);
      if (resumed.kind !== 'acquired') throw new Error(`expected to acquire, got ${resumed.kind}`);
      expect((await h.stored(committed))?.expiresAt).toBeUndefined();
      await s.commit(resumed.lease, created);
      expect((await h.stored(committed))?.expiresAt).toBe(Math.ceil(clock.now() / 1000) + TTL_SECONDS);

      const abandoned = newKey();
      await claimRecoverable(s, abandoned);
      clock.advance(10 * pastTtl);
      const recovered = await s.resume(abandoned);
      if (recovered.kind !== 'acquired') throw new Error(`expected to acquire, got ${recovered.kind}`);
      expect(await s.abandon(recovered.lease)).toBe(true);
      expect((await h.stored(abandoned))?.expiresAt).toBe(Math.ceil(clock.now() / 1000) + TTL_SECONDS);
      clock.advance(TTL_SECONDS * 1000 - 1000);
      expect((await s.claim(abandoned, 'fp')).kind).toBe('acquired');
    });

    it('is the only record that outlives its TTL: one claimed without recovery expires as before', async () => {
      const clock = new FakeClock(Date.now());
      const s = store(clock, TTL_SECONDS);
      const key = newKey();
      const outcome = await s.claim(key, 'fp');
      if (outcome.kind !== 'acquired') throw new Error('expected to acquire');
      await s.release(outcome.lease);
      expect((await h.stored(key))?.expiresAt).toEqual(expect.any(Number));
      clock.advance(pastTtl);
      const again = await s.claim(key, 'another body is fine after expiry');
      if (again.kind !== 'acquired') throw new Error(`expected to acquire, got ${again.kind}`);
      expect(again.lease.takeover).toBe(false);
      expect(again.lease.downstreamKey).not.toBe(outcome.lease.downstreamKey);
    });
  });

  describe('abandon', () => {
    it('leaves the index but keeps the fingerprint and downstream key for a late retry of the same request', async () => {
      const clock = new FakeClock(Date.now());
      const s = store(clock);
      const key = newKey();
      const original = await claimRecoverable(s, key);
      clock.advance(LEASE_MS);
      const resumed = await s.resume(key);
      if (resumed.kind !== 'acquired') throw new Error(`expected to acquire, got ${resumed.kind}`);
      expect(await s.abandon(resumed.lease)).toBe(true);
      await settledIndex(key, false);
      expect((await h.stored(key))?.status).toBe(RecordStatus.Abandoned);

      expect((await s.claim(key, 'another body')).kind).toBe('mismatch');
      const late = await s.claim(key, 'fp', { recoverable: true });
      if (late.kind !== 'acquired') throw new Error(`expected to acquire, got ${late.kind}`);
      expect(late.lease.downstreamKey).toBe(original.downstreamKey);
      expect(late.lease.recoverable).toBe(true);
    });

    it('never abandons an operation it does not own', async () => {
      const clock = new FakeClock(Date.now());
      const s = store(clock);
      const key = newKey();
      const stale = await claimRecoverable(s, key);
      clock.advance(LEASE_MS);
      const resumed = await s.resume(key);
      expect(resumed.kind).toBe('acquired');
      expect(await s.abandon(stale)).toBe(false);
      expect((await h.stored(key))?.status).toBe(RecordStatus.InProgress);
    });

    it('recognizes its own abandon, and its own release, when asked again after a lost reply', async () => {
      const clock = new FakeClock(Date.now());
      const s = store(clock);
      const abandoned = await claimRecoverable(s, newKey());
      expect(await s.abandon(abandoned)).toBe(true);
      expect(await s.abandon(abandoned)).toBe(true);
      const released = await claimRecoverable(s, newKey());
      expect(await s.release(released)).toBe(true);
      expect(await s.release(released)).toBe(true);
    });
  });

  describe('a completed operation', () => {
    it('replays for a full TTL after it completes, however late that was', async () => {
      const clock = new FakeClock(Date.now());
      const ttlSeconds = 120;
      const s = store(clock, ttlSeconds);
      const key = newKey();
      const lease = await claimRecoverable(s, key);
      clock.advance(LEASE_MS);
      const resumed = await s.resume(key);
      if (resumed.kind !== 'acquired') throw new Error(`expected to acquire, got ${resumed.kind}`);
      clock.advance(60_000);
      await s.commit(resumed.lease, created);
      clock.advance(ttlSeconds * 1000 - 1000);
      expect((await s.claim(key, 'fp')).kind).toBe('replay');
      expect(lease.downstreamKey).toBe(resumed.lease.downstreamKey);
    });
  });
});
