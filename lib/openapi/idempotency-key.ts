import { MAX_KEY_LENGTH } from 'keystone-idempotency/engine';

/**
 * The `Idempotency-Key` header's rules as a JSON Schema pattern, for the OpenAPI document. The handler parses keys
 * with `parseIdempotencyKey` (packages/keystone-idempotency/src/engine/key.ts), not with this pattern; a property test checks that the two accept
 * exactly the same header values, so the documented rule can't drift from the enforced one.
 *
 * Either a bare key, 1 to 255 visible ASCII characters not starting with a double quote, or an RFC 8941 string:
 * in double quotes, printable ASCII with `\"` and `\\` escapes, 1 to 255 characters once unescaped. Each
 * alternative of the quoted form is one unescaped character, so `{1,255}` counts them.
 */
export const IDEMPOTENCY_KEY_PATTERN = `^(?:[!#-~][!-~]{0,${MAX_KEY_LENGTH - 1}}|"(?:[ !#-\\[\\]-~]|\\\\["\\\\]){1,${MAX_KEY_LENGTH}}")$`;

export const IDEMPOTENCY_KEY_DESCRIPTION = [
  `The client's key for this operation: 1 to ${MAX_KEY_LENGTH} visible ASCII characters (no spaces), or an RFC 8941`,
  'quoted string (`"order 42"`, with `\\"` and `\\\\` escapes) whose content is 1 to 255 characters; `"abc"` and `abc`',
  'are the same key. Scoped to your account and to this operation. Send the same key with the same body to retry',
  'safely: a completed request is replayed (Idempotent-Replayed: true), a running one answers 409, and the same key',
  'with a different body answers 422. Keys are kept for 24 hours.',
].join(' ');
