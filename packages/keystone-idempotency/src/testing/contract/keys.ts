import assert from 'node:assert/strict';
import type { IdempotencyStore } from '../../engine/contract.js';
import { InvalidKeyError } from '../../engine/errors.js';
import type { Lease, StoredResponse } from '../../engine/record.js';
import { type Contract, created, newKey } from './context.js';

/** Keys of any characters: kept as they are or refused, never two made one. */
export function describeKeys<TEffect>(contract: Contract<TEffect>): void {
  const { describe, it, store, stored } = contract;
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
      const keys = ['\ufffd', '\ufffe', '\uffff', '\u{1f600}', '\u0001\u001f\u007f', '\u00e9', 'e\u0301', '|', ' '].map(
        (odd) => `${base}-${odd}`,
      );
      for (const key of keys) assert.equal(await commitThenClaimAgain(s, key), 'kept', JSON.stringify(key));
    });
  });
}
