import { randomUUID } from 'node:crypto';
import type { IdempotencyStore } from '../../packages/keystone-idempotency/src/engine/contract';
import {
  EffectConditionFailedError,
  InvalidKeyError,
  LeaseLostError,
  ResponseTooLargeError,
} from '../../packages/keystone-idempotency/src/engine/errors';
import { scopedKey } from '../../packages/keystone-idempotency/src/engine/key';
import { type Lease, RecordStatus, type StoredResponse } from '../../packages/keystone-idempotency/src/engine/record';
import { FakeClock } from '../support/fake-clock';
import { storeHarnesses } from '../support/stores';

/**
 * The store contract (packages/keystone-idempotency/src/engine/contract.ts), one suite run against every store: DynamoDB (Local) and PostgreSQL,
 * each real. What is particular to one store (DynamoDB's request kinds, PostgreSQL's pipelining and lock waits)
 * is tested in test/dynamodb and test/postgres.
 */
const created: StoredResponse = {
  statusCode: 201,
  body: '{"id":"pay_1"}',
  headers: { 'Content-Type': 'application/json' },
};
const newKey = (account = 'acct_1') =>
  scopedKey({ accountId: account, operation: 'POST /payments', key: randomUUID() });

/** Claims a key that the test expects to be free (or takeable): the lease, or a failed test. */
async function acquire(s: IdempotencyStore<unknown>, key: string, fp = 'fp'): Promise<Lease> {
  const outcome = await s.claim(key, fp);
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

describe.each(storeHarnesses)('the store contract on %s', (_name, harness) => {
  const h = harness();
  const store = (clock = new FakeClock(), options: { ttlSeconds?: number } = {}) => h.store({ clock, ...options });
  const paymentRow = (key: string, id: string) => h.effect(key, id);

  describe('claim', () => {
    it('lets exactly one of 50 concurrent claims win, and exactly one effect commit', async () => {
      const key = newKey();
      const s = store();
      const outcomes = await Promise.all(
        Array.from({ length: 50 }, async (_, i) => {
          const outcome = await s.claim(key, 'fp');
          if (outcome.kind === 'acquired') await s.commit(outcome.lease, created, [paymentRow(key, `p${i}`)]);
          return outcome.kind;
        }),
      );
      expect(outcomes.filter((kind) => kind === 'acquired')).toHaveLength(1);
      expect(outcomes.filter((kind) => kind !== 'acquired' && kind !== 'in_flight' && kind !== 'replay')).toEqual([]);
      expect(await h.rowsUnder(key)).toBe(1);
    });

    it('replays a completed record in one round trip', async () => {
      const key = newKey();
      const s = store();
      const first = await acquire(s, key);
      await s.commit(first, created);
      h.roundTrips.reset();
      const replay = await s.claim(key, 'fp');
      expect(replay).toMatchObject({ kind: 'replay', response: created });
      expect(h.roundTrips.count).toBe(1);
    });

    it('costs one round trip for a first claim and one for an in-flight duplicate', async () => {
      const key = newKey();
      const s = store();
      h.roundTrips.reset();
      expect((await s.claim(key, 'fp')).kind).toBe('acquired');
      expect((await s.claim(key, 'fp')).kind).toBe('in_flight');
      expect(h.roundTrips.count).toBe(2);
    });

    it('reports a mismatch for the same key with another fingerprint, in flight or completed', async () => {
      const key = newKey();
      const s = store();
      const first = await acquire(s, key);
      expect((await s.claim(key, 'other')).kind).toBe('mismatch');
      await s.commit(first, created);
      expect((await s.claim(key, 'other')).kind).toBe('mismatch');
    });

    it('keeps two accounts using the same client key apart', async () => {
      const clientKey = randomUUID();
      const s = store();
      const a = scopedKey({ accountId: 'acct_a', operation: 'POST /payments', key: clientKey });
      const b = scopedKey({ accountId: 'acct_b', operation: 'POST /payments', key: clientKey });
      const claimA = await acquire(s, a);
      await s.commit(claimA, created);
      const claimB = await s.claim(b, 'other-body');
      expect(claimB.kind).toBe('acquired');
      if (claimB.kind === 'acquired') expect(claimB.lease.downstreamKey).not.toBe(claimA.downstreamKey);
    });

    it('treats a record past its expiry as new, with a new downstream key, even before it is deleted', async () => {
      const clock = new FakeClock();
      const s = store(clock, { ttlSeconds: 60 });
      const key = newKey();
      const first = await acquire(s, key);
      await s.commit(first, created);
      clock.advance(61_000);
      expect(await s.get(key)).toBeUndefined();
      expect(await h.stored(key)).toBeDefined();
      const again = await s.claim(key, 'a different body is fine after expiry');
      expect(again.kind).toBe('acquired');
      if (again.kind === 'acquired') {
        expect(again.lease.downstreamKey).not.toBe(first.downstreamKey);
        expect(again.lease.takeover).toBe(false);
        expect(again.lease.attempt).toBe(1);
      }
    });

    it('waits for an in-flight original when asked, and replays its result', async () => {
      const key = newKey();
      const s = store(new FakeClock());
      const first = await acquire(s, key);
      setTimeout(() => void s.commit(first, created), 150);
      const waited = await s.claim(key, 'fp', { waitMs: 3000 });
      expect(waited).toMatchObject({ kind: 'replay', response: created });
    });

    it('stops waiting at its bound and reports in flight', async () => {
      const key = newKey();
      const s = store();
      await s.claim(key, 'fp');
      const started = Date.now();
      expect((await s.claim(key, 'fp', { waitMs: 300 })).kind).toBe('in_flight');
      // The owner never finishes (its clock stands still): only the bound ends the wait, long before this.
      expect(Date.now() - started).toBeLessThan(10_000);
    });

    it('holds a longer lease when asked, never a shorter one', async () => {
      const clock = new FakeClock();
      const s = store(clock);
      const longer = await s.claim(newKey(), 'fp', { leaseMs: 90_000 });
      const shorter = await s.claim(newKey(), 'fp', { leaseMs: 1_000 });
      expect(longer).toMatchObject({ kind: 'acquired', lease: { leaseExpiresAt: clock.now() + 90_000 } });
      expect(shorter).toMatchObject({ kind: 'acquired', lease: { leaseExpiresAt: clock.now() + 30_000 } });
    });
  });

  describe('a write whose reply is lost', () => {
    it('recognizes its own claim when the client sends again a claim that already landed', async () => {
      const key = newKey();
      const lost = h.faults.loseReplies('claim', key);
      const outcome = await h.faults.store().claim(key, 'fp');
      expect(lost.fired()).toBe(1);
      expect(outcome).toMatchObject({ kind: 'acquired', lease: { attempt: 1, takeover: false } });
      if (outcome.kind === 'acquired') expect((await h.stored(key))?.leaseToken).toBe(outcome.lease.leaseToken);
    });

    it('recognizes its own takeover when the client sends again a takeover that already landed', async () => {
      const clock = new FakeClock();
      const key = newKey();
      const first = await acquire(store(clock), key);
      clock.advance(30_001);
      const lost = h.faults.loseReplies('takeover', key);
      const outcome = await h.faults.store({ clock }).claim(key, 'fp');
      expect(lost.fired()).toBe(1);
      expect(outcome).toMatchObject({
        kind: 'acquired',
        lease: { takeover: true, downstreamKey: first.downstreamKey },
      });
    });

    it('commits once when the client sends again a commit whose reply was lost', async () => {
      const s = h.faults.store();
      const key = newKey();
      const claimed = await acquire(s, key);
      const lost = h.faults.loseReplies('commit', key);
      await s.commit(claimed, created, [paymentRow(key, 'once')]);
      expect(lost.fired()).toBe(1);
      expect(await h.rowsUnder(key)).toBe(1);
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
    });

    it('commits once when the caller commits again after the client gave up', async () => {
      const s = h.faults.store({ attempts: 1 });
      const key = newKey();
      const claimed = await acquire(s, key);
      const lost = h.faults.loseReplies('commit', key);
      await expect(s.commit(claimed, created, [paymentRow(key, 'once')])).rejects.toThrow();
      expect(lost.fired()).toBe(1);
      await s.commit(claimed, created, [paymentRow(key, 'once')]);
      expect(await h.rowsUnder(key)).toBe(1);
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
    });

    it('recognizes its own release when sent again', async () => {
      const s = h.faults.store();
      const key = newKey();
      const claimed = await acquire(s, key);
      const lost = h.faults.loseReplies('release', key);
      expect(await s.release(claimed)).toBe(true);
      expect(lost.fired()).toBe(1);
      expect((await s.get(key))?.status).toBe(RecordStatus.Released);
    });
  });

  describe('takeover', () => {
    it('gives an expired lease to exactly one of two concurrent takers, keeping the downstream key', async () => {
      const clock = new FakeClock();
      const s = store(clock);
      const key = newKey();
      const dead = await acquire(s, key);
      clock.advance(30_001);
      const [one, two] = await Promise.all([s.claim(key, 'fp'), s.claim(key, 'fp')]);
      const winners = [one, two].filter((outcome) => outcome.kind === 'acquired');
      expect(winners).toHaveLength(1);
      expect([one, two].map((o) => o.kind).sort()).toEqual(['acquired', 'in_flight']);
      const winner = winners[0];
      if (winner?.kind !== 'acquired') throw new Error('expected a winner');
      expect(winner.lease.takeover).toBe(true);
      expect(winner.lease.downstreamKey).toBe(dead.downstreamKey);
      expect(winner.lease.leaseToken).not.toBe(dead.leaseToken);
      expect(winner.lease.attempt).toBe(2);
    });

    it('rejects the stale owner’s commit after a takeover and writes none of its effects', async () => {
      const clock = new FakeClock();
      const s = store(clock);
      const key = newKey();
      const stale = await acquire(s, key);
      clock.advance(30_001);
      const current = await acquire(s, key);

      await expect(s.commit(stale, created, [paymentRow(key, 'stale')])).rejects.toBeInstanceOf(LeaseLostError);
      expect(await h.rowsUnder(key)).toBe(0);

      await s.commit(current, created, [paymentRow(key, 'current')]);
      expect(await h.rowsUnder(key)).toBe(1);
      await expect(s.commit(stale, created, [paymentRow(key, 'late')])).rejects.toBeInstanceOf(LeaseLostError);
      expect(await h.rowsUnder(key)).toBe(1);
    });

    it('tells the stale owner, as a typed field, the record that fenced it', async () => {
      const clock = new FakeClock();
      const s = store(clock);
      const key = newKey();
      const stale = await acquire(s, key);
      clock.advance(30_001);
      const current = await acquire(s, key);

      const error = await s.commit(stale, created, [paymentRow(key, 'stale')]).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LeaseLostError);
      expect((error as LeaseLostError).record).toMatchObject({
        key,
        status: RecordStatus.InProgress,
        leaseToken: current.leaseToken,
        attempt: 2,
      });
    });

    it('lets a slow owner whose lease ran out still commit when nobody took over', async () => {
      const clock = new FakeClock();
      const s = store(clock);
      const key = newKey();
      const slow = await acquire(s, key);
      clock.advance(45_000);
      await s.commit(slow, created, [paymentRow(key, 'slow')]);
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay' });
    });
  });

  describe('release', () => {
    it('frees the key for a retry that keeps the fingerprint check and the downstream key', async () => {
      const s = store();
      const key = newKey();
      const first = await acquire(s, key);
      expect(await s.release(first)).toBe(true);
      expect((await s.claim(key, 'other')).kind).toBe('mismatch');
      const retry = await s.claim(key, 'fp');
      expect(retry.kind).toBe('acquired');
      if (retry.kind === 'acquired') {
        expect(retry.lease.downstreamKey).toBe(first.downstreamKey);
        expect(retry.lease.takeover).toBe(true);
      }
    });

    it('never touches a claim it does not own', async () => {
      const clock = new FakeClock();
      const s = store(clock);
      const key = newKey();
      const stale = await acquire(s, key);
      clock.advance(30_001);
      const current = await acquire(s, key);
      expect(await s.release(stale)).toBe(false);
      expect((await s.claim(key, 'fp')).kind).toBe('in_flight');
      expect(await h.stored(key)).toMatchObject({ status: RecordStatus.InProgress, leaseToken: current.leaseToken });
    });

    it('makes the Powertools duplicate-deletes-the-original race impossible', async () => {
      // Powertools 2.35: a duplicate that is turned away deletes the in-progress record it never owned, and a third
      // request then runs the handler again. Here a duplicate holds no lease, so it has nothing to release, and the
      // original keeps its claim through any number of duplicates.
      const s = store();
      const key = newKey();
      const original = await acquire(s, key);
      const duplicates = await Promise.all(Array.from({ length: 5 }, () => s.claim(key, 'fp')));
      expect(duplicates.map((d) => d.kind)).toEqual(Array(5).fill('in_flight'));
      const third = await s.claim(key, 'fp');
      expect(third.kind).toBe('in_flight');
      await s.commit(original, created, [paymentRow(key, 'once')]);
      expect(await h.rowsUnder(key)).toBe(1);
    });

    it('cannot release a completed record', async () => {
      const s = store();
      const key = newKey();
      const first = await acquire(s, key);
      await s.commit(first, created);
      expect(await s.release(first)).toBe(false);
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay' });
    });
  });

  describe('commit', () => {
    it('writes neither the effect nor the completion when an effect condition fails', async () => {
      const s = store();
      const key = newKey();
      const first = await acquire(s, key);
      const error = await s.commit(first, created, [paymentRow(key, 'p'), h.blockedEffect()]).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(EffectConditionFailedError);
      expect((error as EffectConditionFailedError).index).toBe(1);
      expect(await h.rowsUnder(key)).toBe(0);
      expect((await s.claim(key, 'fp')).kind).toBe('in_flight');
    });

    it('refuses a response too large to store, writing nothing', async () => {
      const s = store();
      const key = newKey();
      const first = await acquire(s, key);
      const huge = { ...created, body: 'x'.repeat(h.maxResponseBytes + 1) };
      await expect(s.commit(first, huge, [paymentRow(key, 'p')])).rejects.toBeInstanceOf(ResponseTooLargeError);
      expect(await h.rowsUnder(key)).toBe(0);
    });

    it('is one round trip when effects are staged', async () => {
      const s = store();
      const key = newKey();
      const first = await acquire(s, key);
      h.roundTrips.reset();
      await s.commit(first, created, [paymentRow(key, 'p')]);
      expect(h.roundTrips.count).toBe(1);
    });

    it('replays the stored response byte for byte: status, headers, and a body of any characters', async () => {
      const s = store();
      const key = newKey();
      const odd: StoredResponse = {
        statusCode: 402,
        body: '{"é":"😀","nul":"\u0000","quote":"\\"","line":"a\\nb"}',
        headers: { 'Content-Type': 'application/problem+json', Location: '/payments/p 1' },
      };
      await s.commit(await acquire(s, key), odd);
      const replay = await s.claim(key, 'fp');
      expect(replay).toMatchObject({ kind: 'replay' });
      if (replay.kind === 'replay') expect(replay.response).toStrictEqual(odd);
    });

    it('keeps a binary (base64-encoded) response as it was stored', async () => {
      const s = store();
      const key = newKey();
      const binary: StoredResponse = {
        statusCode: 200,
        body: Buffer.from([0, 1, 2, 250, 255]).toString('base64'),
        headers: { 'Content-Type': 'application/octet-stream' },
        isBase64Encoded: true,
      };
      await s.commit(await acquire(s, key), binary);
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: binary });
    });
  });

  describe('commit with nothing staged', () => {
    it('is one round trip, and replays', async () => {
      const s = store();
      const key = newKey();
      const first = await acquire(s, key);
      h.roundTrips.reset();
      await s.commit(first, created);
      expect(h.roundTrips.count).toBe(1);
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
    });

    it('completes the record as a transaction would: out of the recovery set, kept a full TTL from the commit', async () => {
      const clock = new FakeClock(Date.now());
      const s = store(clock, { ttlSeconds: 3600 });
      const key = newKey();
      const claimed = await s.claim(key, 'fp', { recoverable: true });
      if (claimed.kind !== 'acquired') throw new Error(`expected to acquire, got ${claimed.kind}`);
      clock.advance(20_000);
      await s.commit(claimed.lease, created);
      const record = await h.stored(key);
      expect(record).toMatchObject({
        status: RecordStatus.Completed,
        leaseToken: claimed.lease.leaseToken,
        response: created,
        expiresAt: Math.ceil(clock.now() / 1000) + 3600,
      });
      expect(record).not.toHaveProperty('recoverAt');
    });

    it('recognises its own completion when the client sends again a completion whose reply was lost', async () => {
      const s = h.faults.store();
      const key = newKey();
      const claimed = await acquire(s, key);
      const lost = h.faults.loseReplies('completion', key);
      await s.commit(claimed, created);
      expect(lost.fired()).toBe(1);
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
    });

    it('recognises its own completion when the caller commits again after the client gave up', async () => {
      const s = h.faults.store({ attempts: 2 });
      const key = newKey();
      const claimed = await acquire(s, key);
      const lost = h.faults.loseReplies('completion', key, 2);
      await expect(s.commit(claimed, created)).rejects.toThrow();
      expect(lost.fired()).toBe(2);
      await s.commit(claimed, created);
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: created });
    });

    it('rejects a stale owner, even once the owner that took over has completed the record', async () => {
      const clock = new FakeClock();
      const s = store(clock);
      const key = newKey();
      const stale = await acquire(s, key);
      clock.advance(30_001);
      const current = await acquire(s, key);

      await expect(s.commit(stale, created)).rejects.toBeInstanceOf(LeaseLostError);
      await s.commit(current, { ...created, body: '{"id":"pay_current"}' });
      // Completed, but under another lease token: not this owner's completion.
      const late = await s.commit(stale, created).catch((error: unknown) => error);
      expect(late).toBeInstanceOf(LeaseLostError);
      expect((late as LeaseLostError).record).toMatchObject({ leaseToken: current.leaseToken });
      expect(await s.claim(key, 'fp')).toMatchObject({ kind: 'replay', response: { body: '{"id":"pay_current"}' } });
    });
  });

  describe('keys of any characters', () => {
    /** A response that names the key it was committed under: a replay of another key's would show. */
    const responseFor = (key: string): StoredResponse => ({ ...created, body: JSON.stringify({ key }) });

    /** Claims and commits `key`; then (or on a refusal) what a second claim of it answers. */
    async function commitThenClaimAgain(s: IdempotencyStore<unknown>, key: string) {
      const first = await s.claim(key, 'fp').catch((error: unknown) => error);
      if (first instanceof InvalidKeyError) return 'refused';
      if (first instanceof Error || (first as { kind: string }).kind !== 'acquired') {
        throw new Error(`a first claim of a fresh key answered ${String(first)} ${JSON.stringify(first)}`);
      }
      await s.commit((first as { lease: Lease }).lease, responseFor(key));
      const again = await s.claim(key, 'fp');
      if (again.kind !== 'replay') throw new Error(`the second claim answered ${again.kind}`);
      return JSON.parse(again.response.body).key === key ? 'kept' : 'replayed another key';
    }

    // Each pair differs in one UTF-16 code unit; a store that keeps either one otherwise than it is joins them.
    it.each([
      ['two lone surrogates', '\ud800', '\ud801'],
      ['U+FFFD and a lone surrogate', '\ufffd', '\ud800'],
      ['a lone surrogate and a lone low surrogate', '\ud800', '\udc00'],
      ['a lone surrogate and nothing', '\ud800', ''],
      ['NUL and nothing', '\u0000', ''],
    ])('never makes two distinct keys one: %s', async (_case, first, second) => {
      const s = store();
      const base = newKey();
      const outcomes = [
        await commitThenClaimAgain(s, `${base}-${first}`),
        await commitThenClaimAgain(s, `${base}-${second}`),
      ];
      expect(outcomes.every((outcome) => outcome === 'refused' || outcome === 'kept')).toBe(true);
    });

    it('refuses a key holding a NUL or a lone surrogate with InvalidKeyError, writing nothing', async () => {
      const s = store();
      for (const odd of ['\u0000', '\ud800', '\udfff', 'a\ud83d', '\ude00b']) {
        const key = `${newKey()}-${odd}`;
        const refusal = { name: 'InvalidKeyError', reason: 'unstorable_characters' };
        await expect(s.claim(key, 'fp')).rejects.toMatchObject(refusal);
        await expect(
          s.claimAndCommit(key, 'fp', async () => ({ response: created, effects: [] })),
        ).rejects.toMatchObject(refusal);
        await expect(s.resume(key)).rejects.toMatchObject(refusal);
        expect(await h.stored(key.replaceAll(/\p{Cs}/gu, '\ufffd').replaceAll('\u0000', ''))).toBeUndefined();
      }
    });

    it('keeps every other character as it is: U+FFFD, U+FFFE, U+FFFF, emoji, controls, unnormalized accents', async () => {
      const s = store();
      const base = newKey();
      const keys = ['\ufffd', '\ufffe', '\uffff', '\u{1f600}', '\u0001\u001f\u007f', '\u00e9', 'e\u0301', '|', ' '].map(
        (odd) => `${base}-${odd}`,
      );
      for (const key of keys) expect(await commitThenClaimAgain(s, key)).toBe('kept');
    });
  });

  describe('claimAndCommit (one-shot local work)', () => {
    const build = (key: string, id: string) => async () => ({ response: created, effects: [paymentRow(key, id)] });

    it('commits claim, effect and completion in one round trip', async () => {
      const s = store();
      const key = newKey();
      h.roundTrips.reset();
      expect((await s.claimAndCommit(key, 'fp', build(key, 'p1'))).kind).toBe('committed');
      expect(h.roundTrips.count).toBe(1);
      expect(await h.rowsUnder(key)).toBe(1);
    });

    it('answers a duplicate from that same round trip', async () => {
      const s = store();
      const key = newKey();
      await s.claimAndCommit(key, 'fp', build(key, 'p1'));
      h.roundTrips.reset();
      expect(await s.claimAndCommit(key, 'fp', build(key, 'p2'))).toMatchObject({ kind: 'replay', response: created });
      expect(h.roundTrips.count).toBe(1);
      expect((await s.claimAndCommit(key, 'other', build(key, 'p3'))).kind).toBe('mismatch');
      expect(await h.rowsUnder(key)).toBe(1);
    });

    it('makes exactly one effect out of 50 concurrent attempts', async () => {
      const s = store();
      const key = newKey();
      const outcomes = await Promise.all(
        Array.from({ length: 50 }, (_, i) => s.claimAndCommit(key, 'fp', build(key, `p${i}`))),
      );
      expect(outcomes.filter((o) => o.kind === 'committed')).toHaveLength(1);
      expect(outcomes.every((o) => o.kind === 'committed' || o.kind === 'replay')).toBe(true);
      expect(await h.rowsUnder(key)).toBe(1);
    });

    it('completes a released record, reusing its downstream key', async () => {
      const s = store();
      const key = newKey();
      const claimed = await acquire(s, key);
      await s.release(claimed);
      const outcome = await s.claimAndCommit(key, 'fp', build(key, 'p1'));
      expect(outcome).toMatchObject({ kind: 'committed', downstreamKey: claimed.downstreamKey });
      expect(await h.stored(key)).toMatchObject({ status: RecordStatus.Completed, attempt: 2 });
    });

    it('reports in flight while a two-phase owner holds the key, writing nothing', async () => {
      const s = store();
      const key = newKey();
      await s.claim(key, 'fp');
      expect((await s.claimAndCommit(key, 'fp', build(key, 'p1'))).kind).toBe('in_flight');
      expect(await h.rowsUnder(key)).toBe(0);
    });

    it('writes nothing when one of its effects fails its own condition', async () => {
      const s = store();
      const key = newKey();
      const error = await s
        .claimAndCommit(key, 'fp', async () => ({
          response: created,
          effects: [paymentRow(key, 'p'), h.blockedEffect()],
        }))
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(EffectConditionFailedError);
      expect(error).toMatchObject({ index: 1 });
      expect(await h.rowsUnder(key)).toBe(0);
      expect(await h.stored(key)).toBeUndefined();
    });

    it('commits once when the client sends again a one-shot commit whose reply was lost', async () => {
      const s = h.faults.store();
      const key = newKey();
      const lost = h.faults.loseReplies('commit', key);
      expect(await s.claimAndCommit(key, 'fp', build(key, 'once'))).toMatchObject({ kind: 'committed' });
      expect(lost.fired()).toBe(1);
      expect(await h.rowsUnder(key)).toBe(1);
    });
  });
});
