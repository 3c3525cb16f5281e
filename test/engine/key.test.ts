import fc from 'fast-check';
import { InvalidKeyError } from '../../lib/engine/errors';
import { joinScopedKey, parseIdempotencyKey, scopedKey, splitScopedKey } from '../../lib/engine/key';

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
