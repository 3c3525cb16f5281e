import assert from 'node:assert/strict';
import {
  EffectConditionFailedError,
  EffectKindError,
  LeaseLostError,
  ResponseTooLargeError,
  TooManyEffectsError,
} from '../../engine/errors.js';
import { RecordStatus, type StoredResponse } from '../../engine/record.js';
import { assertMatches, rejection } from '../match.js';
import { acquire, type Contract, created, newKey, ODD_TEXT } from './context.js';

/** The commit with effects: all or nothing, within the limits, the response kept byte for byte. */
export function describeCommit<TEffect>(contract: Contract<TEffect>): void {
  const { h, describe, it, store, stored, countingIt } = contract;
  describe('commit', () => {
    it('writes neither the effect nor the completion when an effect condition fails', async () => {
      const s = store();
      // The failing effect first, between two, and last: the error names its index each time.
      for (const index of [0, 1, 2]) {
        const key = newKey();
        const first = await acquire(s, key);
        const effects = [h.effect(key, 'p'), h.effect(key, 'q')];
        effects.splice(index, 0, h.blockedEffect());
        const error = await rejection(s.commit(first, created, effects));
        assert.ok(error instanceof EffectConditionFailedError, `expected EffectConditionFailedError, got ${error}`);
        assert.equal(error.index, index);
        assert.equal(await h.rowsUnder(key), 0);
        assert.equal((await s.claim(key, 'fp')).kind, 'in_flight');
      }
    });

    it('refuses a commit after its owner released the record, writing nothing', async () => {
      const s = store();
      const key = newKey();
      const lease = await acquire(s, key);
      assert.equal(await s.release(lease), true);
      await assert.rejects(s.commit(lease, created, [h.effect(key, 'after')]), LeaseLostError);
      assert.equal(await h.rowsUnder(key), 0);
      assertMatches(await stored(key, s), { status: RecordStatus.Released, leaseToken: lease.leaseToken });
    });

    it('refuses an effect it cannot write, before anything is written', async () => {
      const s = store();
      if (typeof s.checkEffect !== 'function') return; // optional: a store without it checks nothing here
      const key = newKey();
      const lease = await acquire(s, key);
      const foreign = { notAnEffect: true } as unknown as TEffect;
      assert.throws(() => s.checkEffect?.(foreign, 0), { name: 'EffectKindError' });
      // Nothing any store writes, each refused with the index it was given.
      for (const [index, nothing] of [null, undefined, 'SELECT 1', 42, true, [], {}].entries()) {
        assert.throws(() => s.checkEffect?.(nothing, index), { name: 'EffectKindError', index }, String(nothing));
      }
      const refused = await rejection(s.commit(lease, created, [h.effect(key, 'p'), foreign]));
      assert.ok(refused instanceof EffectKindError && refused.index === 1, `got ${refused}`);
      assert.equal(await h.rowsUnder(key), 0);
      assert.equal((await s.claim(key, 'fp')).kind, 'in_flight', 'still held by its owner');
    });

    it('writes every one of as many effects as one commit carries, and refuses one more', async () => {
      const s = store();
      const key = newKey();
      const lease = await acquire(s, key);
      const effects = (count: number) => Array.from({ length: count }, (_, i) => h.effect(key, `e${i}`));
      await assert.rejects(s.commit(lease, created, effects(s.maxEffects + 1)), TooManyEffectsError);
      assert.equal(await h.rowsUnder(key), 0);
      await s.commit(lease, created, effects(s.maxEffects));
      assert.equal(await h.rowsUnder(key), s.maxEffects);
    });

    it('keeps a response of exactly the largest size, byte for byte', async () => {
      const s = store();
      const key = newKey();
      const headers = { 'Content-Type': 'application/json' };
      const headerBytes = Buffer.byteLength('Content-Type') + Buffer.byteLength(headers['Content-Type']);
      // Four-byte characters first: a store that counts characters, not bytes, or cuts the body short shows.
      const emoji = '\u{1f600}'.repeat(16);
      const body = emoji + 'x'.repeat(h.maxResponseBytes - headerBytes - Buffer.byteLength(emoji));
      const largest: StoredResponse = { statusCode: 200, body, headers };
      await s.commit(await acquire(s, key), largest);
      const replay = await s.claim(key, 'fp');
      assert.equal(replay.kind, 'replay');
      if (replay.kind === 'replay') {
        assert.equal(replay.response.body.length, body.length, 'the body kept whole');
        assert.deepStrictEqual({ ...replay.response }, largest);
      }
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

    it('replays a response holding a NUL and lone surrogates: headers exactly, the body as the same UTF-8', async () => {
      const s = store();
      for (const odd of ODD_TEXT) {
        const key = newKey();
        const sent: StoredResponse = {
          statusCode: 201,
          body: `{"note":"${odd}"}${odd}`,
          headers: { 'X-Note': odd, [`X-${odd}`]: 'name' },
        };
        await s.commit(await acquire(s, key), sent);
        const replay = await s.claim(key, 'fp');
        if (replay.kind !== 'replay') assert.fail(`${JSON.stringify(odd)}: the second claim answered ${replay.kind}`);
        assert.deepStrictEqual({ ...replay.response.headers }, sent.headers, `${JSON.stringify(odd)}: headers`);
        assert.ok(
          Buffer.from(replay.response.body).equals(Buffer.from(sent.body)),
          `${JSON.stringify(odd)}: body ${JSON.stringify(replay.response.body)}`,
        );
      }
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
}
