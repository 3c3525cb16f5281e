import { InvalidKeyError } from './errors.js';

export const MAX_KEY_LENGTH = 255;

/**
 * The longest stored key, in UTF-8 bytes: DynamoDB's limit on a partition key (2048 bytes), which also keeps a
 * PostgreSQL `(scope, key)` primary key well inside a B-tree entry's limit (about 2700 bytes). Only an account or an
 * operation can make a key this long (a route-less front door's operation is the path as sent): the client's own key
 * is at most {@link MAX_KEY_LENGTH} UTF-16 code units, 765 bytes.
 */
export const MAX_STORED_KEY_BYTES = 2048;

/**
 * A lone surrogate: a UTF-16 code unit D800-DFFF not paired with its other half. With the `u` flag a well-formed pair
 * (an emoji) is one code point, outside `\p{Cs}`, so this is `!String.prototype.isWellFormed()`, which the ES2023
 * library this builds against does not declare.
 */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Refuses a key, or one part of a scope (an account, an operation, the client's key), that a store could not keep as
 * it is. `what` names the part in the message. What no key may hold, in any part, on any store:
 *
 * - NUL (U+0000), which a PostgreSQL `text` can't hold (`22021 invalid byte sequence` on every attempt); refused on
 *   DynamoDB too, so a key means the same on both stores;
 * - a lone surrogate, which is no character at all: on its way to DynamoDB or PostgreSQL it becomes U+FFFD, so
 *   `"\ud800"`, `"\ud801"` (and on PostgreSQL `"\ufffd"`) would be one stored key, and the later calls would replay
 *   the first one's result without running.
 *
 * Every other character is kept as it is by both stores (well-formed UTF-16 is valid UTF-8): U+FFFD, U+FFFE and U+FFFF,
 * emoji, control characters other than NUL. Neither store normalizes Unicode: `é` and `e` + U+0301 stay two keys.
 *
 * @throws {InvalidKeyError} `unstorable_characters`.
 */
export function assertStorableKeyPart(value: string, what: string): void {
  if (value.includes('\u0000')) {
    throw new InvalidKeyError(
      `${what} holds a NUL character (U+0000), which a store can't keep`,
      'unstorable_characters',
    );
  }
  const surrogate = LONE_SURROGATE.exec(value)?.[0];
  if (surrogate === undefined) return;
  const unit = surrogate.charCodeAt(0).toString(16).toUpperCase();
  throw new InvalidKeyError(
    `${what} holds an unpaired surrogate (U+${unit}): not well-formed Unicode, which a store would keep as U+FFFD`,
    'unstorable_characters',
  );
}

/**
 * Refuses a stored key that a store could not keep as it is, or that is longer than `MAX_STORED_KEY_BYTES` (2048):
 * the check every store's claim, takeover, resume and one-shot commit pass through (`src/engine/ownership.ts`), so two
 * distinct keys never become one stored key, whichever adapter (or direct caller) made them.
 *
 * @throws {InvalidKeyError} `unstorable_characters`, `too_long` or `empty`.
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export function assertStorableKey(stored: string): void {
  if (stored.length === 0) throw new InvalidKeyError('the key is empty', 'empty');
  assertStorableKeyPart(stored, 'the key');
  const bytes = Buffer.byteLength(stored, 'utf8');
  if (bytes > MAX_STORED_KEY_BYTES) {
    throw new InvalidKeyError(
      `the stored key (account, operation and key) is ${bytes} bytes in UTF-8, over the ${MAX_STORED_KEY_BYTES}-byte limit`,
      'too_long',
    );
  }
}

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
 *
 * Every part must be something a store keeps as it is: no NUL and no lone surrogate (see `assertStorableKeyPart`;
 * `encodeURIComponent` would throw a `URIError` on a lone surrogate in the account or operation), and the whole at
 * most `MAX_STORED_KEY_BYTES` bytes. Anything else is refused with {@link InvalidKeyError} (a 400 over HTTP, a
 * failed record for SQS, a throw from `makeIdempotent`) before any store is asked.
 *
 * @throws {InvalidKeyError} an empty account (`missing`), a part a store can't keep (`unstorable_characters`), or a
 * stored key too long (`too_long`).
 */
export function scopedKey(scope: KeyScope): string {
  if (scope.accountId.length === 0) throw new InvalidKeyError('a key must be scoped to an account', 'missing');
  assertStorableKeyPart(scope.accountId, 'the account');
  assertStorableKeyPart(scope.operation, 'the operation');
  assertStorableKeyPart(scope.key, 'the key');
  const stored = `${encodeURIComponent(scope.accountId)}|${encodeURIComponent(scope.operation)}|${scope.key}`;
  assertStorableKey(stored);
  return stored;
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
