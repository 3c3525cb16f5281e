import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Clock } from '../engine/clock.js';
import type { IdempotencyStore } from '../engine/contract.js';
import {
  CheckpointTooLargeError,
  EffectConditionFailedError,
  InvalidKeyError,
  LeaseLostError,
  ResponseTooLargeError,
  StepOutcomeUnknownError,
  StepResultNotJsonError,
  StepUsageError,
  TooManyEffectsError,
  TooManyStepsError,
} from '../engine/errors.js';
import { scopedKey } from '../engine/key.js';
import { ClaimedOperation } from '../engine/operation.js';
import { type IdempotencyRecord, type Lease, RecordStatus, type StoredResponse } from '../engine/record.js';
import { DEFAULT_MAX_STEPS, StepState } from '../engine/steps.js';
import { frameworkOf, type TestFramework } from './framework.js';
import { ManualClock } from './manual-clock.js';
import { assertMatches, rejection } from './match.js';

/** What the suite builds a store with: a clock it moves, and the lease and TTL a case needs. */
export interface ContractStoreOptions {
  readonly clock: Clock;
  readonly leaseSeconds: number;
  readonly ttlSeconds?: number;
}

/** The steps of the protocol whose reply a case can lose on the way back from the database. */
export type LostReplyStep = 'claim' | 'takeover' | 'release' | 'completion' | 'commit';

/**
 * What the suite needs of the store under test: the store, an effect that writes one row, how many rows a key has,
 * an effect whose own condition fails, and the largest response the store keeps. The rest is optional and each
 * adds the cases that need it: a count of round trips (a first claim, a replay and a commit each cost one), the
 * record as the database holds it (past its expiry too), and replies lost after the database applied the write.
 */
export interface StoreContractHarness<TEffect> {
  /** A store over the database under test, with the suite's clock, lease and TTL (pass them all on). */
  store(options: ContractStoreOptions): IdempotencyStore<TEffect>;
  /** Writes one row under `pk`, refused by its own condition if the row `pk`/`id` exists already. */
  effect(pk: string, id: string): TEffect;
  /** An effect whose own condition fails (it checks for a row that is not there): the commit must write nothing. */
  blockedEffect(): TEffect;
  /** How many rows the effects have written under `pk`: the witness for "the effect happened, once". */
  rowsUnder(pk: string): Promise<number>;
  /** The largest response (body plus headers, bytes) the store keeps; one byte more must be refused. */
  readonly maxResponseBytes: number;
  /** Round trips to the database since the last reset. Without it, the cases that count them are left out. */
  readonly roundTrips?: { reset(): void; readonly count: number };
  /**
   * The record under `key` as the database holds it, past its expiry or not, read behind the store's back. Without
   * it the suite reads through `store.get`, and leaves out the check that an expired record is still there.
   */
  stored?(key: string): Promise<IdempotencyRecord | undefined>;
  /** Stores whose replies can be lost. Without it, the cases of lost replies are left out. */
  readonly faults?: {
    /** `attempts`: how many times the store's client sends a request whose reply was lost (its own retries). */
    store(options: ContractStoreOptions & { attempts?: number }): IdempotencyStore<TEffect>;
    /** The next `times` requests of `step` on `key` are applied by the database and lose their reply. */
    loseReplies(step: LostReplyStep, key: string, times?: number): { fired(): number };
  };
}

export interface StoreContractOptions<TEffect> {
  /** Names the suite: `the store contract on <name>`. */
  readonly name: string;
  /**
   * Makes the harness. Called once, inside the suite's `describe`, so the hooks it registers (a `beforeAll` that
   * creates the tables, an `afterAll` that closes the pool) run around the suite's tests.
   */
  readonly setup: () => StoreContractHarness<TEffect>;
  /** The framework's `describe` and `it`; by default the host's globals (jest, or vitest with globals). */
  readonly framework?: Partial<TestFramework>;
}

/** The lease every case's store holds, in seconds: the cases move the clock past it (30_001 ms) or not. */
const LEASE_SECONDS = 30;
const LEASE_MS = LEASE_SECONDS * 1000;

const created: StoredResponse = {
  statusCode: 201,
  body: '{"id":"pay_1"}',
  headers: { 'Content-Type': 'application/json' },
};

const newKey = (account = 'acct_1') =>
  scopedKey({ accountId: account, operation: 'POST /payments', key: randomUUID() });

/** Claims a key that the case expects to be free (or takeable): the lease, or a failed case. */
async function acquire(s: IdempotencyStore<unknown>, key: string, fp = 'fp'): Promise<Lease> {
  const outcome = await s.claim(key, fp);
  if (outcome.kind !== 'acquired') assert.fail(`expected to acquire ${key}, got ${outcome.kind}`);
  return outcome.lease;
}

/**
 * The store contract (`IdempotencyStore`), as one suite of tests any store runs against its real database: exactly
 * one winner of a race, replays, mismatches, expiry, waits, takeovers that keep the downstream key, stale owners
 * fenced out (their effects with them), releases, commits that write all or nothing, responses kept byte for byte,
 * keys of any characters kept apart, the recovery set (`findDue`: due a lease after the claim or the release, oldest
 * first, out once committed; its cases keep to their own keys among the table's), recovery points (steps checkpointed
 * with their effects, resumed after a crash or a takeover, fenced, limited, new after expiry), recovery's resume and
 * abandon (and an unfinished recoverable operation that never expires), the one-shot commit, and (with `faults`) every
 * write whose reply was lost recognised as its own. The package's DynamoDB and PostgreSQL stores are proven by this
 * same suite.
 *
 * Registers its tests with the host framework when called (at the top level of a test file, or in a `describe`),
 * and asserts with node:assert, so it needs nothing but the framework's `describe` and `it`.
 *
 * @example
 * describeStoreContract({
 *   name: 'MyDatabase',
 *   setup: () => {
 *     const db = myTestDatabase(); // registers beforeAll/afterAll
 *     return {
 *       store: (options) => new DriverStore(new MyDatabaseDriver(db.client), options),
 *       effect: (pk, id) => db.insertIfAbsent(pk, id),
 *       blockedEffect: () => db.requireRow(`missing-${randomUUID()}`),
 *       rowsUnder: (pk) => db.countRows(pk),
 *       maxResponseBytes: 1024 * 1024,
 *     };
 *   },
 * });
 */
export function describeStoreContract<TEffect>(options: StoreContractOptions<TEffect>): void {
  const { describe, it } = frameworkOf(options.framework);

  describe(`the store contract on ${options.name}`, () => {
    const h = options.setup();
    const store = (clock = new ManualClock(), settings: { ttlSeconds?: number } = {}) =>
      h.store({ clock, leaseSeconds: LEASE_SECONDS, ...settings });
    const stored = (key: string, via: IdempotencyStore<TEffect>) => (h.stored ? h.stored(key) : via.get(key));
    const rounds = h.roundTrips;
    /** A case that counts round trips, registered only when the harness counts them. */
    const countingIt = (name: string, test: (counter: { reset(): void; readonly count: number }) => Promise<void>) => {
      if (rounds) it(name, () => test(rounds));
    };
    const faults = h.faults;
    const faultyStore = (settings: { clock?: ManualClock; attempts?: number } = {}) => {
      if (!faults) throw new Error('unreachable: cases of lost replies are registered only with faults');
      const { clock = new ManualClock(), attempts } = settings;
      return faults.store({ clock, leaseSeconds: LEASE_SECONDS, ...(attempts ? { attempts } : {}) });
    };
    const loseReplies = (step: LostReplyStep, key: string, times?: number) => {
      if (!faults) throw new Error('unreachable: cases of lost replies are registered only with faults');
      return faults.loseReplies(step, key, times);
    };
    /** A case that loses replies, registered only when the harness can lose them. */
    const faultIt = (name: string, test: () => Promise<void>) => {
      if (faults) it(name, test);
    };

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

    describe('release', () => {
      it('frees the key for a retry that keeps the fingerprint check and the downstream key', async () => {
        const s = store();
        const key = newKey();
        const first = await acquire(s, key);
        assert.equal(await s.release(first), true);
        assert.equal((await s.claim(key, 'other')).kind, 'mismatch');
        const retry = await s.claim(key, 'fp');
        assert.equal(retry.kind, 'acquired');
        if (retry.kind === 'acquired') {
          assert.equal(retry.lease.downstreamKey, first.downstreamKey);
          assert.equal(retry.lease.takeover, true);
        }
      });

      it('never touches a claim it does not own', async () => {
        const clock = new ManualClock();
        const s = store(clock);
        const key = newKey();
        const stale = await acquire(s, key);
        clock.advance(LEASE_MS + 1);
        const current = await acquire(s, key);
        assert.equal(await s.release(stale), false);
        assert.equal((await s.claim(key, 'fp')).kind, 'in_flight');
        assertMatches(await stored(key, s), { status: RecordStatus.InProgress, leaseToken: current.leaseToken });
      });

      it('makes the Powertools duplicate-deletes-the-original race impossible', async () => {
        // Powertools 2.35: a duplicate that is turned away deletes the in-progress record it never owned, and a third
        // request then runs the handler again. Here a duplicate holds no lease, so it has nothing to release, and the
        // original keeps its claim through any number of duplicates.
        const s = store();
        const key = newKey();
        const original = await acquire(s, key);
        const duplicates = await Promise.all(Array.from({ length: 5 }, () => s.claim(key, 'fp')));
        assert.deepEqual(
          duplicates.map((d) => d.kind),
          Array(5).fill('in_flight'),
        );
        const third = await s.claim(key, 'fp');
        assert.equal(third.kind, 'in_flight');
        await s.commit(original, created, [h.effect(key, 'once')]);
        assert.equal(await h.rowsUnder(key), 1);
      });

      it('cannot release a completed record', async () => {
        const s = store();
        const key = newKey();
        const first = await acquire(s, key);
        await s.commit(first, created);
        assert.equal(await s.release(first), false);
        assertMatches(await s.claim(key, 'fp'), { kind: 'replay' });
      });
    });

    describe('commit', () => {
      it('writes neither the effect nor the completion when an effect condition fails', async () => {
        const s = store();
        const key = newKey();
        const first = await acquire(s, key);
        const error = await rejection(s.commit(first, created, [h.effect(key, 'p'), h.blockedEffect()]));
        assert.ok(error instanceof EffectConditionFailedError, `expected EffectConditionFailedError, got ${error}`);
        assert.equal(error.index, 1);
        assert.equal(await h.rowsUnder(key), 0);
        assert.equal((await s.claim(key, 'fp')).kind, 'in_flight');
      });

      it('refuses a response too large to store, writing nothing', async () => {
        const s = store();
        const key = newKey();
        const first = await acquire(s, key);
        const huge = { ...created, body: 'x'.repeat(h.maxResponseBytes + 1) };
        await assert.rejects(s.commit(first, huge, [h.effect(key, 'p')]), ResponseTooLargeError);
        assert.equal(await h.rowsUnder(key), 0);
      });

      countingIt('is one round trip when effects are staged', async (counter) => {
        const s = store();
        const key = newKey();
        const first = await acquire(s, key);
        counter.reset();
        await s.commit(first, created, [h.effect(key, 'p')]);
        assert.equal(counter.count, 1);
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
        assert.equal(replay.kind, 'replay');
        if (replay.kind === 'replay') assert.deepStrictEqual({ ...replay.response }, odd);
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
        assertMatches(await s.claim(key, 'fp'), { kind: 'replay', response: binary });
      });
    });

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

      faultIt(
        'recognises its own completion when the client sends again a completion whose reply was lost',
        async () => {
          const s = faultyStore();
          const key = newKey();
          const claimed = await acquire(s, key);
          const lost = loseReplies('completion', key);
          await s.commit(claimed, created);
          assert.equal(lost.fired(), 1);
          assertMatches(await s.claim(key, 'fp'), { kind: 'replay', response: created });
        },
      );

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

    describe('keys of any characters', () => {
      /** A response that names the key it was committed under: a replay of another key's would show. */
      const responseFor = (key: string): StoredResponse => ({ ...created, body: JSON.stringify({ key }) });

      /** Claims and commits `key`; then (or on a refusal) what a second claim of it answers. */
      async function commitThenClaimAgain(s: IdempotencyStore<TEffect>, key: string) {
        const first = await s.claim(key, 'fp').catch((error: unknown) => error);
        if (first instanceof InvalidKeyError) return 'refused';
        if (first instanceof Error || (first as { kind: string }).kind !== 'acquired') {
          assert.fail(`a first claim of a fresh key answered ${String(first)} ${JSON.stringify(first)}`);
        }
        await s.commit((first as { lease: Lease }).lease, responseFor(key));
        const again = await s.claim(key, 'fp');
        if (again.kind !== 'replay') assert.fail(`the second claim answered ${again.kind}`);
        return JSON.parse(again.response.body).key === key ? 'kept' : 'replayed another key';
      }

      // Each pair differs in one UTF-16 code unit; a store that keeps either one otherwise than it is joins them.
      const pairs: readonly [string, string, string][] = [
        ['two lone surrogates', '\ud800', '\ud801'],
        ['U+FFFD and a lone surrogate', '\ufffd', '\ud800'],
        ['a lone surrogate and a lone low surrogate', '\ud800', '\udc00'],
        ['a lone surrogate and nothing', '\ud800', ''],
        ['NUL and nothing', '\u0000', ''],
      ];
      for (const [name, first, second] of pairs) {
        it(`never makes two distinct keys one: ${name}`, async () => {
          const s = store();
          const base = newKey();
          const outcomes = [
            await commitThenClaimAgain(s, `${base}-${first}`),
            await commitThenClaimAgain(s, `${base}-${second}`),
          ];
          assert.ok(
            outcomes.every((outcome) => outcome === 'refused' || outcome === 'kept'),
            `outcomes: ${outcomes.join(', ')}`,
          );
        });
      }

      it('refuses a key holding a NUL or a lone surrogate with InvalidKeyError, writing nothing', async () => {
        const s = store();
        for (const odd of ['\u0000', '\ud800', '\udfff', 'a\ud83d', '\ude00b']) {
          const key = `${newKey()}-${odd}`;
          const refusal = { name: 'InvalidKeyError', reason: 'unstorable_characters' };
          await assert.rejects(s.claim(key, 'fp'), refusal);
          await assert.rejects(
            s.claimAndCommit(key, 'fp', async () => ({ response: created, effects: [] })),
            refusal,
          );
          await assert.rejects(s.resume(key), refusal);
          const mangled = key.replaceAll(/\p{Cs}/gu, '\ufffd').replaceAll('\u0000', '');
          assert.equal(await stored(mangled, s), undefined, 'nothing written under the key it would become');
        }
      });

      it('keeps every other character as it is: U+FFFD, U+FFFE, U+FFFF, emoji, controls, unnormalized accents', async () => {
        const s = store();
        const base = newKey();
        const keys = [
          '\ufffd',
          '\ufffe',
          '\uffff',
          '\u{1f600}',
          '\u0001\u001f\u007f',
          '\u00e9',
          'e\u0301',
          '|',
          ' ',
        ].map((odd) => `${base}-${odd}`);
        for (const key of keys) assert.equal(await commitThenClaimAgain(s, key), 'kept', JSON.stringify(key));
      });
    });

    describe('findDue (the recovery set)', () => {
      // Every case reads with a limit far above what a test table holds, and keeps to its own keys: other cases'
      // records share the table. Clocks start at the real now (DynamoDB Local's TTL sweeper works in wall-clock time).
      const dueKeys = async (s: IdempotencyStore<TEffect>) => (await s.findDue({ limit: 1000 })).map((due) => due.key);
      const claimRecoverable = async (s: IdempotencyStore<TEffect>, key: string): Promise<Lease> => {
        const outcome = await s.claim(key, 'fp', { recoverable: true });
        if (outcome.kind !== 'acquired') assert.fail(`expected to acquire ${key}, got ${outcome.kind}`);
        return outcome.lease;
      };
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
        assert.equal((await claimRecoverable(s, key)).recoverable, true);
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
        const lease = await claimRecoverable(s, key);
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
        const lease = await claimRecoverable(s, committed);
        await settled(committed, true);
        await s.commit(lease, created);
        const outcome = await s.claim(plain, 'fp');
        if (outcome.kind !== 'acquired') assert.fail(`expected to acquire ${plain}, got ${outcome.kind}`);
        assert.equal(outcome.lease.recoverable, false);
        await s.release(outcome.lease);
        // A recoverable claim made after both: once it shows, the set has caught up with them.
        const control = newKey();
        await claimRecoverable(s, control);
        await settled(control, true);
        await settled(committed, false);
        clock.advance(10 * LEASE_MS);
        const due = await dueKeys(s);
        assert.deepEqual(
          [committed, plain, control].map((key) => due.includes(key)),
          [false, false, true],
        );
      });

      it('answers oldest first, within its limit', async () => {
        const clock = new ManualClock(Date.now());
        const s = store(clock);
        const keys = [newKey(), newKey(), newKey()];
        for (const key of keys) {
          await claimRecoverable(s, key);
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

    describe('resume (recovery taking over by key)', () => {
      /** Claims `key` for work whose effect lives elsewhere: tracked in the recovery set. */
      async function acquireRecoverable(s: IdempotencyStore<TEffect>, key: string): Promise<Lease> {
        const outcome = await s.claim(key, 'fp', { recoverable: true });
        if (outcome.kind !== 'acquired') assert.fail(`expected to acquire ${key}, got ${outcome.kind}`);
        return outcome.lease;
      }

      it('takes over a released operation, keeping its fingerprint and downstream key', async () => {
        const s = store(new ManualClock(Date.now()));
        const key = newKey();
        const first = await acquireRecoverable(s, key);
        assert.equal(await s.release(first), true);
        const resumed = await s.resume(key);
        assertMatches(resumed, {
          kind: 'acquired',
          lease: { downstreamKey: first.downstreamKey, fingerprint: 'fp', takeover: true, attempt: 2 },
        });
        if (resumed.kind !== 'acquired') assert.fail('expected to resume');
        await s.commit(resumed.lease, created, [h.effect(key, 'recovered')]);
        assertMatches(await s.claim(key, 'fp'), { kind: 'replay', response: created });
        assert.equal(await h.rowsUnder(key), 1);
      });

      it('takes over an owner whose lease ran out, and never disturbs a live one', async () => {
        const clock = new ManualClock(Date.now());
        const s = store(clock);
        const key = newKey();
        const owner = await acquireRecoverable(s, key);
        const live = await s.resume(key);
        assert.equal(live.kind, 'in_flight');
        if (live.kind === 'in_flight') assert.ok(live.retryAfterMs > 0, `retryAfterMs ${live.retryAfterMs}`);
        clock.advance(LEASE_MS + 1);
        const resumed = await s.resume(key);
        assertMatches(resumed, { kind: 'acquired', lease: { downstreamKey: owner.downstreamKey, attempt: 2 } });
        await assert.rejects(s.commit(owner, created), LeaseLostError);
      });

      it('answers completed for a committed operation, and absent for a key never claimed, creating nothing', async () => {
        const s = store(new ManualClock(Date.now()));
        const key = newKey();
        await s.commit(await acquireRecoverable(s, key), created);
        assertMatches(await s.resume(key), { kind: 'completed', record: { key, status: RecordStatus.Completed } });
        const never = newKey();
        assertMatches(await s.resume(never), { kind: 'absent' });
        assert.equal(await stored(never, s), undefined);
      });

      it('answers absent for another generation than the downstream key it is given', async () => {
        const s = store(new ManualClock(Date.now()));
        const key = newKey();
        const first = await acquireRecoverable(s, key);
        await s.release(first);
        assertMatches(await s.resume(key, { downstreamKey: 'idk_another_generation' }), { kind: 'absent' });
        assertMatches(await s.resume(key, { downstreamKey: first.downstreamKey }), { kind: 'acquired' });
      });

      it('never lets an unfinished recoverable operation expire, however long recovery takes', async () => {
        const clock = new ManualClock(Date.now());
        const s = store(clock, { ttlSeconds: 60 });
        const crashed = newKey();
        const released = newKey();
        const owner = await acquireRecoverable(s, crashed);
        await s.release(await acquireRecoverable(s, released));
        clock.advance(10 * 60_000);
        assertMatches(await s.get(crashed), { status: RecordStatus.InProgress, downstreamKey: owner.downstreamKey });
        assertMatches(await s.get(released), { status: RecordStatus.Released });
        // A late retry takes it over under the same downstream key, never as a fresh generation.
        assertMatches(await s.claim(crashed, 'fp'), {
          kind: 'acquired',
          lease: { takeover: true, downstreamKey: owner.downstreamKey },
        });
        assertMatches(await s.resume(released), { kind: 'acquired', lease: { takeover: true } });
      });
    });

    describe('abandon', () => {
      it('gives up an operation: out of the recovery set, kept a full TTL, and a late retry keeps its downstream key', async () => {
        const clock = new ManualClock(Date.now());
        const s = store(clock, { ttlSeconds: 3600 });
        const key = newKey();
        const claimed = await s.claim(key, 'fp', { recoverable: true });
        if (claimed.kind !== 'acquired') assert.fail(`expected to acquire, got ${claimed.kind}`);
        clock.advance(5_000);
        assert.equal(await s.abandon(claimed.lease), true);
        const record = await stored(key, s);
        assertMatches(record, { status: RecordStatus.Abandoned, expiresAt: Math.ceil(clock.now() / 1000) + 3600 });
        assert.equal(record?.recoverAt, undefined, 'out of the recovery set');
        assert.equal((await s.claim(key, 'other')).kind, 'mismatch');
        assertMatches(await s.claim(key, 'fp'), {
          kind: 'acquired',
          lease: { takeover: true, downstreamKey: claimed.lease.downstreamKey },
        });
      });

      it('never abandons a claim it does not own', async () => {
        const clock = new ManualClock(Date.now());
        const s = store(clock);
        const key = newKey();
        const stale = await acquire(s, key);
        clock.advance(LEASE_MS + 1);
        const current = await acquire(s, key);
        assert.equal(await s.abandon(stale), false);
        assertMatches(await stored(key, s), { status: RecordStatus.InProgress, leaseToken: current.leaseToken });
      });
    });

    describe('recovery points (steps)', () => {
      /** The operation's handle over a lease, as every adapter builds it. */
      const operation = (s: IdempotencyStore<TEffect>, lease: Lease) => new ClaimedOperation(s, lease);
      /**
       * A case on a store with checkpoints; a store without them must refuse a step before it runs, and that is
       * all the case checks of it.
       */
      const stepIt = (name: string, test: (s: IdempotencyStore<TEffect>, clock: ManualClock) => Promise<void>) =>
        it(name, async () => {
          const clock = new ManualClock(Date.now());
          const s = store(clock, { ttlSeconds: 3600 });
          if (typeof s.checkpoint === 'function') return test(s, clock);
          const lease = await acquire(s, newKey());
          let ran = false;
          const refused = await rejection(
            operation(s, lease).handle.step('a', async () => {
              ran = true;
            }),
          );
          assert.ok(refused instanceof StepUsageError && refused.reason === 'unsupported', `got ${refused}`);
          assert.equal(ran, false);
        });

      stepIt('checkpoints each step with its effects in one write, and the commit keeps the progress', async (s) => {
        const key = newKey();
        const lease = await acquire(s, key);
        const op = operation(s, lease);
        const reserved = await op.handle.step('reserve', async (step) => {
          step.stage(h.effect(key, 'reserve'));
          return { units: 2 };
        });
        assert.deepEqual(reserved, { units: 2 });
        assert.equal(await h.rowsUnder(key), 1, "the step's effect committed with its checkpoint");
        const charge = await op.handle.step('charge', async (step) => ({ id: `ch_${step.downstreamKey}` }));
        assert.equal(charge.id, `ch_${lease.downstreamKey}:charge`);
        assertMatches(await stored(key, s), {
          status: RecordStatus.InProgress,
          progress: {
            revision: 2,
            steps: [
              { name: 'reserve', state: StepState.Done, result: { units: 2 }, attempt: 1 },
              { name: 'charge', state: StepState.Done, result: charge, attempt: 1 },
            ],
          },
        });
        await op.commit(created);
        assertMatches(await stored(key, s), { status: RecordStatus.Completed, progress: { revision: 2 } });
      });

      stepIt('resumes a takeover after a crash between steps: a step done never runs again', async (s, clock) => {
        const key = newKey();
        const first = await acquire(s, key);
        await operation(s, first).handle.step('reserve', async (step) => {
          step.stage(h.effect(key, 'reserve'));
          return 'reserved';
        });
        // Crash: no release, no commit. The lease runs out and a retry takes the operation over.
        clock.advance(LEASE_MS + 1);
        const second = await acquire(s, key);
        assertMatches(second, { takeover: true, attempt: 2, progress: { revision: 1 } });
        const resumed = operation(s, second);
        let reran = false;
        const again = await resumed.handle.step('reserve', async () => {
          reran = true;
          return 'again';
        });
        assert.equal(reran, false);
        assert.equal(again, 'reserved', 'the recorded result');
        const keys: string[] = [];
        await resumed.handle.step('charge', async (step) => keys.push(step.downstreamKey));
        assert.deepEqual(keys, [`${first.downstreamKey}:charge`]);
        await resumed.commit(created);
        assert.equal(await h.rowsUnder(key), 1);
      });

      stepIt('runs a deduping step that crashed inside again, under the same step key', async (s, clock) => {
        const key = newKey();
        const first = await acquire(s, key);
        const keys: string[] = [];
        await rejection(
          operation(s, first).handle.step('charge', async (step) => {
            keys.push(step.downstreamKey);
            throw new Error('crashed after the call');
          }),
        );
        clock.advance(LEASE_MS + 1);
        const second = await acquire(s, key);
        await operation(s, second).handle.step('charge', async (step) => {
          keys.push(step.downstreamKey);
          step.stage(h.effect(key, 'charge'));
        });
        assert.deepEqual(keys, [`${first.downstreamKey}:charge`, `${first.downstreamKey}:charge`]);
        assert.equal(await h.rowsUnder(key), 1);
      });

      stepIt('asks the resolver of a step found started: found is recorded without running it', async (s, clock) => {
        const key = newKey();
        const first = await acquire(s, key);
        await rejection(
          operation(s, first).handle.step(
            'ship',
            async () => {
              throw new Error('crashed inside the call');
            },
            { resolve: async () => ({ notFound: true }) },
          ),
        );
        assertMatches(await stored(key, s), { progress: { steps: [{ name: 'ship', state: StepState.Started }] } });
        clock.advance(LEASE_MS + 1);
        const op = operation(s, await acquire(s, key));
        let ran = false;
        const shipment = await op.handle.step(
          'ship',
          async () => {
            ran = true;
            return { id: 'shp_new' };
          },
          {
            resolve: async (step) => {
              step.stage(h.effect(key, 'ship'));
              return { found: { id: 'shp_1' } };
            },
          },
        );
        assert.equal(ran, false);
        assert.deepEqual(shipment, { id: 'shp_1' });
        assert.equal(await h.rowsUnder(key), 1, "the resolver's effects commit with the step's checkpoint");
        assertMatches(await stored(key, s), { progress: { steps: [{ name: 'ship', state: StepState.Done }] } });
      });

      stepIt(
        'runs a started step the resolver did not find, and retries later one it could not tell',
        async (s, clock) => {
          const key = newKey();
          const first = await acquire(s, key);
          await rejection(
            operation(s, first).handle.step(
              'ship',
              async () => {
                throw new Error('crashed');
              },
              { resolve: async () => ({ notFound: true }) },
            ),
          );
          clock.advance(LEASE_MS + 1);
          const unknown = await rejection(
            operation(s, await acquire(s, key)).handle.step('ship', async () => 'ran', {
              resolve: async () => ({ unknown: true }),
            }),
          );
          assert.ok(unknown instanceof StepOutcomeUnknownError, `got ${unknown}`);
          assertMatches(await stored(key, s), { progress: { steps: [{ name: 'ship', state: StepState.Started }] } });
          clock.advance(LEASE_MS + 1);
          const ran = await operation(s, await acquire(s, key)).handle.step('ship', async () => 'ran', {
            resolve: async () => ({ notFound: true }),
          });
          assert.equal(ran, 'ran');
          assertMatches(await stored(key, s), {
            progress: { steps: [{ name: 'ship', state: StepState.Done, result: 'ran', attempt: 3 }] },
          });
        },
      );

      stepIt(
        "fences an owner taken over mid-step: its step's checkpoint and effects are not written",
        async (s, clock) => {
          const key = newKey();
          const stale = operation(s, await acquire(s, key));
          const lost = await rejection(
            stale.handle.step('charge', async (step) => {
              clock.advance(LEASE_MS + 1);
              const current = await acquire(s, key); // a retry takes over while this owner is still in its step
              assert.equal(current.downstreamKey, stale.lease.downstreamKey);
              step.stage(h.effect(key, 'stale'));
              return 'stale';
            }),
          );
          assert.ok(lost instanceof LeaseLostError, `expected LeaseLostError, got ${lost}`);
          assert.equal(await h.rowsUnder(key), 0);
          assert.equal((await stored(key, s))?.progress, undefined);
        },
      );

      stepIt('refuses a checkpoint that does not follow the stored revision', async (s) => {
        const key = newKey();
        const lease = await acquire(s, key);
        const done = (result: string) => ({ name: 'a', state: StepState.Done, result, attempt: 1, at: 1 });
        await s.checkpoint!(lease, { revision: 1, steps: [done('first')] });
        const skipped = await rejection(
          s.checkpoint!(lease, { revision: 3, steps: [done('third')] }, [h.effect(key, 'x')]),
        );
        assert.ok(skipped instanceof LeaseLostError, `got ${skipped}`);
        assert.equal(await h.rowsUnder(key), 0);
        assertMatches(await stored(key, s), { progress: { revision: 1, steps: [{ result: 'first' }] } });
      });

      stepIt('starts a new generation after expiry: no progress, new step keys', async (s, clock) => {
        const key = newKey();
        const first = await acquire(s, key);
        const op = operation(s, first);
        await op.handle.step('charge', async () => 'charged');
        assert.equal(await op.release(), true);
        assertMatches(await stored(key, s), { status: RecordStatus.Released, progress: { revision: 1 } });
        clock.advance(3_600_000 + LEASE_MS + 1_000);
        const fresh = await acquire(s, key);
        assert.equal(fresh.takeover, false);
        assert.equal(fresh.progress, undefined);
        assert.notEqual(fresh.downstreamKey, first.downstreamKey);
        const keys: string[] = [];
        await operation(s, fresh).handle.step('charge', async (step) => keys.push(step.downstreamKey));
        assert.deepEqual(keys, [`${fresh.downstreamKey}:charge`]);
      });

      stepIt('keeps the progress through release, takeover and abandon', async (s) => {
        const key = newKey();
        const claimed = await s.claim(key, 'fp', { recoverable: true });
        if (claimed.kind !== 'acquired') assert.fail(claimed.kind);
        const op = operation(s, claimed.lease);
        await op.handle.step('a', async () => 1);
        await op.release();
        const resumed = await s.resume(key);
        if (resumed.kind !== 'acquired') assert.fail(resumed.kind);
        assertMatches(resumed.lease, { progress: { revision: 1, steps: [{ name: 'a', result: 1 }] } });
        assert.equal(await s.abandon(resumed.lease), true);
        assertMatches(await stored(key, s), { status: RecordStatus.Abandoned, progress: { revision: 1 } });
      });

      stepIt('checks the limits before a step runs, and what it returns before writing it', async (s) => {
        const lease = await acquire(s, newKey());
        const op = operation(s, lease);
        const maxSteps = s.maxSteps ?? DEFAULT_MAX_STEPS;
        for (let i = 0; i < maxSteps; i++) await op.handle.step(`s${i}`, async () => i);
        let ran = false;
        const tooMany = await rejection(
          op.handle.step('one-more', async () => {
            ran = true;
          }),
        );
        assert.ok(tooMany instanceof TooManyStepsError, `got ${tooMany}`);
        assert.equal(ran, false);

        const other = operation(s, await acquire(s, newKey()));
        const huge = await rejection(
          other.handle.step('huge', async () => 'x'.repeat((s.maxCheckpointBytes ?? 65_536) + 1)),
        );
        assert.ok(huge instanceof CheckpointTooLargeError, `got ${huge}`);
        const notJson = await rejection(other.handle.step('dated', async () => ({ at: new Date(0) })));
        assert.ok(notJson instanceof StepResultNotJsonError && notJson.path === '$.at', `got ${notJson}`);
        assert.equal((await stored(other.lease.key, s))?.progress, undefined, 'nothing written');
        const effects = await rejection(
          other.handle.step('many', async (step) => {
            step.stage(...Array.from({ length: s.maxEffects + 1 }, (_, i) => h.effect(other.lease.key, `e${i}`)));
          }),
        );
        assert.ok(effects instanceof TooManyEffectsError, `got ${effects}`);
        const repeated = await rejection(other.handle.step('huge', async () => 1));
        assert.ok(repeated instanceof StepUsageError && repeated.reason === 'duplicate_name', `got ${repeated}`);
      });

      faultIt('checkpoints once when the client sends again a checkpoint whose reply was lost', async () => {
        const s = faultyStore();
        if (typeof s.checkpoint !== 'function') return;
        const key = newKey();
        const op = operation(s, await acquire(s, key));
        const lost = loseReplies('commit', key);
        await op.handle.step('reserve', async (step) => {
          step.stage(h.effect(key, 'reserve'));
        });
        assert.equal(lost.fired(), 1);
        assert.equal(await h.rowsUnder(key), 1);
        assertMatches(await stored(key, s), { progress: { revision: 1, steps: [{ name: 'reserve', state: 'done' }] } });
      });

      faultIt('checkpoints once when the caller sends a checkpoint again after the client gave up', async () => {
        const s = faultyStore({ attempts: 1 });
        if (typeof s.checkpoint !== 'function') return;
        const key = newKey();
        const lease = await acquire(s, key);
        const progress = { revision: 1, steps: [{ name: 'a', state: StepState.Done, attempt: 1, at: 1 }] };
        const lost = loseReplies('commit', key);
        await rejection(s.checkpoint(lease, progress, [h.effect(key, 'once')]));
        assert.equal(lost.fired(), 1);
        await s.checkpoint(lease, progress, [h.effect(key, 'once')]);
        assert.equal(await h.rowsUnder(key), 1);
        assertMatches(await stored(key, s), { progress: { revision: 1 } });
      });
    });

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

      it('reports in flight while a two-phase owner holds the key, writing nothing', async () => {
        const s = store();
        const key = newKey();
        await s.claim(key, 'fp');
        assert.equal((await s.claimAndCommit(key, 'fp', build(key, 'p1'))).kind, 'in_flight');
        assert.equal(await h.rowsUnder(key), 0);
      });

      it('writes nothing when one of its effects fails its own condition', async () => {
        const s = store();
        const key = newKey();
        const error = await rejection(
          s.claimAndCommit(key, 'fp', async () => ({
            response: created,
            effects: [h.effect(key, 'p'), h.blockedEffect()],
          })),
        );
        assert.ok(error instanceof EffectConditionFailedError, `expected EffectConditionFailedError, got ${error}`);
        assert.equal(error.index, 1);
        assert.equal(await h.rowsUnder(key), 0);
        assert.equal(await stored(key, s), undefined);
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
  });
}
