import { InvalidKeyError } from './errors.js';

export const MAX_KEY_LENGTH = 255;

/** Visible ASCII: `!` (0x21) to `~` (0x7E). No spaces, no control characters, nothing outside ASCII. */
const BARE_KEY = /^[\x21-\x7e]+$/;

/**
 * Parses the client's `Idempotency-Key` header value.
 *
 * Accepts 1 to 255 visible ASCII characters, and also the IETF draft's form, a structured-field string
 * (`"..."`, RFC 8941 §3.3.3), whose quotes are stripped and whose `\"` and `\\` escapes are undone: `"abc"` and
 * `abc` name the same key. Anything else throws {@link InvalidKeyError} with a message a client can act on.
 *
 * @example
 * parseIdempotencyKey('5f1c9a0e-8d2b-4e61-9a55-3b0f6d2c7e14'); // '5f1c9a0e-...'
 * parseIdempotencyKey('"order 42"');                          // 'order 42'
 */
export function parseIdempotencyKey(header: string | undefined | null): string {
  if (header === undefined || header === null) {
    throw new InvalidKeyError('the Idempotency-Key header is required for this request', 'missing');
  }
  const value = header.trim(); // HTTP strips optional whitespace around field values
  if (value.length === 0) throw new InvalidKeyError('the Idempotency-Key header is empty', 'empty');
  const key = value.startsWith('"') ? parseStructuredString(value) : parseBareKey(value);
  if (key.length === 0) throw new InvalidKeyError('the Idempotency-Key header is empty', 'empty');
  if (key.length > MAX_KEY_LENGTH) {
    throw new InvalidKeyError(`the Idempotency-Key must be at most ${MAX_KEY_LENGTH} characters`, 'too_long');
  }
  return key;
}

function parseBareKey(value: string): string {
  if (!BARE_KEY.test(value)) {
    throw new InvalidKeyError(
      'the Idempotency-Key must be visible ASCII characters (no spaces, control or non-ASCII characters)',
      'invalid_characters',
    );
  }
  return value;
}

/** RFC 8941 sf-string: DQUOTE *(unescaped / "\" ( DQUOTE / "\" )) DQUOTE, where unescaped is 0x20-0x7E. */
function parseStructuredString(value: string): string {
  const malformed = () =>
    new InvalidKeyError(
      'the quoted Idempotency-Key is not a valid structured-field string (RFC 8941)',
      'malformed_quoted_string',
    );
  if (value.length < 2 || !value.endsWith('"')) throw malformed();
  let key = '';
  for (let i = 1; i < value.length - 1; i++) {
    const char = value.charAt(i);
    const code = value.charCodeAt(i);
    if (code < 0x20 || code > 0x7e) throw malformed();
    if (char === '"') throw malformed();
    if (char === '\\') {
      const next = value.charAt(i + 1);
      if (i + 1 >= value.length - 1 || (next !== '"' && next !== '\\')) throw malformed();
      key += next;
      i++;
      continue;
    }
    key += char;
  }
  return key;
}

/** What a key is scoped to: whose it is and which operation it names. */
export interface KeyScope {
  /** The caller's account (tenant), from the authorizer: never from the request body. */
  readonly accountId: string;
  /** The operation, e.g. `POST /payments`: the same key on two endpoints is two operations. */
  readonly operation: string;
  /** The client's key, as parsed by {@link parseIdempotencyKey}. */
  readonly key: string;
}

/**
 * The stored partition key. Account and operation are percent-encoded so the separator can't appear in them;
 * the client's key comes last, so any character it holds is unambiguous. Two different scopes never map to the
 * same string, which is what keeps one tenant from ever seeing another's record.
 */
export function scopedKey(scope: KeyScope): string {
  if (scope.accountId.length === 0) throw new InvalidKeyError('a key must be scoped to an account', 'missing');
  return `${encodeURIComponent(scope.accountId)}|${encodeURIComponent(scope.operation)}|${scope.key}`;
}

/**
 * A stored key in two parts, for a store whose primary key has two columns (PostgreSQL's `(scope, key)`), so that a
 * team can list and query keys per account: `scope` is `urlencode(account)|urlencode(operation)`, everything up to
 * the second separator, and `clientKey` the client's own key, however many separators it holds. A key with fewer
 * than two separators (not made by {@link scopedKey}) has the empty scope and is its own client key.
 * {@link joinScopedKey} gives the stored key back exactly: two different keys never split alike.
 *
 * @example
 * splitScopedKey(scopedKey({ accountId: 'acct_1', operation: 'POST /payments', key: 'a|b' }));
 * // { scope: 'acct_1|POST%20%2Fpayments', clientKey: 'a|b' }
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export function splitScopedKey(stored: string): { readonly scope: string; readonly clientKey: string } {
  const first = stored.indexOf('|');
  const second = first < 0 ? -1 : stored.indexOf('|', first + 1);
  if (second < 0) return { scope: '', clientKey: stored };
  return { scope: stored.slice(0, second), clientKey: stored.slice(second + 1) };
}

/**
 * The stored key a {@link splitScopedKey} came from.
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export function joinScopedKey(scope: string, clientKey: string): string {
  return scope === '' ? clientKey : `${scope}|${clientKey}`;
}
