import { checkIdempotencyKey, newIdempotencyKey } from '../../src/client/key';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('newIdempotencyKey', () => {
  it('makes a new UUID v4 each time', () => {
    const keys = new Set(Array.from({ length: 100 }, newIdempotencyKey));
    expect(keys.size).toBe(100);
    for (const key of keys) expect(key).toMatch(UUID_V4);
  });

  it('makes one from getRandomValues where randomUUID is missing (http on a non-loopback host)', () => {
    // An own property shadows the prototype's method, as an insecure context leaves it undefined.
    Object.defineProperty(globalThis.crypto, 'randomUUID', { value: undefined, configurable: true });
    try {
      expect(globalThis.crypto.randomUUID).toBeUndefined();
      const keys = new Set(Array.from({ length: 100 }, newIdempotencyKey));
      expect(keys.size).toBe(100);
      for (const key of keys) expect(key).toMatch(UUID_V4);
    } finally {
      delete (globalThis.crypto as { randomUUID?: unknown }).randomUUID;
    }
    expect(typeof globalThis.crypto.randomUUID).toBe('function');
  });
});

describe('checkIdempotencyKey', () => {
  it('accepts 1 to 255 visible ASCII characters', () => {
    expect(checkIdempotencyKey('order-42')).toBe('order-42');
    expect(checkIdempotencyKey('~'.repeat(255))).toHaveLength(255);
  });

  it.each([
    ['empty', ''],
    ['too long', 'k'.repeat(256)],
    ['with a space', 'order 42'],
    ['non-ASCII', 'commande-42-é'],
    ['with a control character', 'order\n42'],
  ])('refuses a key %s', (_name, key) => {
    expect(() => checkIdempotencyKey(key)).toThrow(TypeError);
  });
});
