import fc from 'fast-check';
import { InvalidKeyError } from '../../src/engine/errors';
import {
  assertStorableKey,
  joinScopedKey,
  MAX_STORED_KEY_BYTES,
  parseIdempotencyKey,
  scopedKey,
  splitScopedKey,
} from '../../src/engine/key';

describe('parseIdempotencyKey', () => {
  it('accepts a UUID as it is', () => {
    expect(parseIdempotencyKey('5f1c9a0e-8d2b-4e61-9a55-3b0f6d2c7e14')).toBe('5f1c9a0e-8d2b-4e61-9a55-3b0f6d2c7e14');
  });

  it('accepts the structured-field string form and strips its quotes and escapes', () => {
    expect(parseIdempotencyKey('"abc"')).toBe('abc');
    expect(parseIdempotencyKey('"order 42"')).toBe('order 42');
    expect(parseIdempotencyKey('"a\\"b\\\\c"')).toBe('a"b\\c');
  });

  it('accepts exactly 255 characters and refuses 256', () => {
    expect(parseIdempotencyKey('k'.repeat(255))).toHaveLength(255);
    expect(() => parseIdempotencyKey('k'.repeat(256))).toThrow(/at most 255/);
  });

  it.each([
    [undefined, 'missing'],
    ['', 'empty'],
    ['   ', 'empty'],
    ['""', 'empty'],
    ['has space', 'invalid_characters'],
    ['tab\there', 'invalid_characters'],
    ['clé', 'invalid_characters'],
    ['"unterminated', 'malformed_quoted_string'],
    ['"bad\\escape"', 'malformed_quoted_string'],
    ['"inner"quote"', 'malformed_quoted_string'],
  ])('refuses %j as %s', (header, reason) => {
    expect(() => parseIdempotencyKey(header)).toThrow(InvalidKeyError);
    try {
      parseIdempotencyKey(header);
    } catch (error) {
      expect((error as InvalidKeyError).reason).toBe(reason);
    }
  });

  it('accepts every string of 1 to 255 visible ASCII characters unchanged', () => {
    const visible = fc.string({
      unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
      minLength: 1,
      maxLength: 255,
    });
    fc.assert(
      fc.property(
        visible.filter((k) => !k.startsWith('"')),
        (key) => parseIdempotencyKey(key) === key,
      ),
    );
  });
});

describe('scopedKey', () => {
  it('gives different accounts, operations and keys different stored keys, even with separators inside', () => {
    const part = fc.string({ maxLength: 12 });
    fc.assert(
      fc.property(part.filter(Boolean), part, part, part.filter(Boolean), part, part, (a1, o1, k1, a2, o2, k2) => {
        const one = scopedKey({ accountId: a1, operation: o1, key: k1 });
        const two = scopedKey({ accountId: a2, operation: o2, key: k2 });
        return (one === two) === (a1 === a2 && o1 === o2 && k1 === k2);
      }),
    );
  });

  it('keeps account ids with the separator apart', () => {
    expect(scopedKey({ accountId: 'a|b', operation: 'POST /x', key: 'k' })).not.toBe(
      scopedKey({ accountId: 'a', operation: 'b|POST /x', key: 'k' }),
    );
  });

  it('refuses an empty account: nothing is stored unscoped', () => {
    expect(() => scopedKey({ accountId: '', operation: 'POST /x', key: 'k' })).toThrow(InvalidKeyError);
  });

  const refusal = { name: 'InvalidKeyError', reason: 'unstorable_characters' };
  const refused = (scope: { accountId?: string; operation?: string; key?: string }) => {
    try {
      scopedKey({ accountId: 'acct_1', operation: 'POST /x', key: 'k', ...scope });
    } catch (error) {
      return error;
    }
    return undefined;
  };

  it.each([
    ['a lone high surrogate', '\ud800'],
    ['a lone low surrogate', '\udc00'],
    ['a pair in the wrong order', '\ude00\ud83d'],
    ['a high surrogate at the end, after a pair', '\u{1f600}\ud83d'],
    ['NUL', 'a\u0000b'],
  ])('refuses %s in the key, the account or the operation with InvalidKeyError, never a URIError', (_case, odd) => {
    for (const part of ['key', 'accountId', 'operation']) {
      expect(refused({ [part]: odd })).toMatchObject(refusal);
    }
  });

  it('names what was refused and where, so the message can be acted on', () => {
    expect(refused({ key: 'ord-\ud801' })).toMatchObject({ message: expect.stringMatching(/key .*U\+D801/) });
    expect(refused({ operation: 'POST /pay\u0000' })).toMatchObject({
      message: expect.stringMatching(/operation .*NUL/),
    });
  });

  it('accepts well-formed text of any kind: surrogate pairs, U+FFFD, U+FFFE, U+FFFF, controls other than NUL', () => {
    for (const odd of ['\u{1f600}', '\ufffd', '\ufffe', '\uffff', '\u0001\u007f', 'e\u0301', '\u00e9']) {
      expect(scopedKey({ accountId: odd, operation: odd, key: odd })).toContain(odd);
    }
  });

  it('never gives two well-formed scopes one stored key, whatever characters they hold', () => {
    const part = fc.string({ unit: 'binary', maxLength: 6 }).filter((s) => !s.includes('\u0000'));
    fc.assert(
      fc.property(part.filter(Boolean), part, part, part.filter(Boolean), part, part, (a1, o1, k1, a2, o2, k2) => {
        const one = scopedKey({ accountId: a1, operation: o1, key: k1 });
        const two = scopedKey({ accountId: a2, operation: o2, key: k2 });
        return (one === two) === (a1 === a2 && o1 === o2 && k1 === k2);
      }),
    );
  });

  it(`refuses a stored key over ${MAX_STORED_KEY_BYTES} bytes of UTF-8, counting bytes, not characters`, () => {
    const operation = (bytes: number) => `POST /${'x'.repeat(bytes)}`;
    const fixed = Buffer.byteLength(scopedKey({ accountId: 'acct_1', operation: operation(0), key: 'k' }));
    expect(() =>
      scopedKey({ accountId: 'acct_1', operation: operation(MAX_STORED_KEY_BYTES - fixed), key: 'k' }),
    ).not.toThrow();
    expect(refused({ operation: operation(MAX_STORED_KEY_BYTES - fixed + 1) })).toMatchObject({ reason: 'too_long' });
    // 255 characters is the client key's limit; 255 three-byte characters fit with room to spare.
    expect(() => scopedKey({ accountId: 'acct_1', operation: 'POST /x', key: '\u20ac'.repeat(255) })).not.toThrow();
  });
});

describe('assertStorableKey', () => {
  it('is what every store checks a key with: a NUL, a lone surrogate, nothing, or too many bytes is refused', () => {
    expect(() => assertStorableKey('acct|op|\ud800')).toThrow(InvalidKeyError);
    expect(() => assertStorableKey('acct|op|\u0000')).toThrow(InvalidKeyError);
    expect(() => assertStorableKey('')).toThrow(InvalidKeyError);
    expect(() => assertStorableKey('\u20ac'.repeat(683))).toThrow(InvalidKeyError); // 2049 bytes
    expect(() => assertStorableKey('\u20ac'.repeat(682))).not.toThrow();
  });
});

describe('splitScopedKey', () => {
  it('splits a scoped key into its scope (account and operation) and the client key, separators and all', () => {
    const stored = scopedKey({ accountId: 'acct|1', operation: 'POST /payments', key: 'order|42|b' });
    expect(splitScopedKey(stored)).toEqual({ scope: 'acct%7C1|POST%20%2Fpayments', clientKey: 'order|42|b' });
  });

  it('gives every key back exactly, and never splits two keys alike', () => {
    const text = fc.string({ unit: fc.constantFrom('a', 'b', '|', '%'), maxLength: 8 });
    fc.assert(
      fc.property(text, text, (one, two) => {
        const a = splitScopedKey(one);
        const b = splitScopedKey(two);
        expect(joinScopedKey(a.scope, a.clientKey)).toBe(one);
        return (a.scope === b.scope && a.clientKey === b.clientKey) === (one === two);
      }),
    );
  });

  it('gives a key made without a scope the empty scope', () => {
    expect(splitScopedKey('plain')).toEqual({ scope: '', clientKey: 'plain' });
    expect(splitScopedKey('one|separator')).toEqual({ scope: '', clientKey: 'one|separator' });
  });

  it('puts the keys of one account and operation under one scope', () => {
    const scope = (key: string) => splitScopedKey(scopedKey({ accountId: 'acct_1', operation: 'op', key })).scope;
    expect(scope('k1')).toBe(scope('k2|x'));
    expect(scope('k1')).not.toBe(splitScopedKey(scopedKey({ accountId: 'acct_2', operation: 'op', key: 'k1' })).scope);
  });
});
