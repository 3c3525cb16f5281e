/**
 * Idempotency keys on the client's side. The rule that makes the server's promise hold: one key per logical
 * operation, chosen before the first send and reused for every retry of it. A fresh key per retry is a new
 * operation to the server, and a second effect (a second charge, a second order).
 */

/** What the server accepts unquoted (RFC 8941 quoted keys are left to callers who need them). */
const MAX_KEY_LENGTH = 255;
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;

/**
 * A new random key (a UUID v4). Persist it with the operation before sending, and the operation survives a reload
 * or a crash: sending it again with the same key cannot do the work twice.
 *
 * `crypto.randomUUID` exists only in secure contexts (https, or http on loopback); elsewhere the same UUID is built
 * from `crypto.getRandomValues`, which every browser and Node >= 20 has.
 */
export function newIdempotencyKey(): string {
  const { crypto } = globalThis;
  if (typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = ((bytes[6] as number) & 0x0f) | 0x40; // version 4
  bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80; // RFC 4122 variant
  const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * Refuses, before anything is sent, a key the server would answer with 400: 1 to 255 visible ASCII characters.
 * A caller's own key (an order id it stored, say) fails here, in its own code, rather than on every attempt.
 */
export function checkIdempotencyKey(key: string): string {
  if (key.length === 0 || key.length > MAX_KEY_LENGTH || !VISIBLE_ASCII.test(key)) {
    throw new TypeError(
      `an Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} visible ASCII characters (no spaces): ${JSON.stringify(key)}`,
    );
  }
  return key;
}
