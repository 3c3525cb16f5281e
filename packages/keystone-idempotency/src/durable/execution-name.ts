import { createHash } from 'node:crypto';

/**
 * What Lambda accepts as a durable execution's name: 1 to 64 of `[a-zA-Z0-9-_]`
 * (`DurableExecutionName`, Lambda API reference).
 */
export const EXECUTION_NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The durable execution's name for a stored (scoped) key: `ks-` and the SHA-256 of the key, base64url (46
 * characters). A scoped key may hold any character and be 2048 bytes long; truncating or escaping it into the name's
 * 64 characters of `[a-zA-Z0-9-_]` would let two keys share a name, and a hash of all of it does not. The same key
 * always names the same execution, which is what makes the start itself idempotent at Lambda: an Invoke with a name
 * that exists and the same payload answers the existing execution.
 *
 * @example
 * executionName(scopedKey({ accountId: 'acct_1', operation: 'POST /approvals', key: 'k-1' })); // 'ks-…' (46 chars)
 */
export function executionName(storedKey: string): string {
  return `ks-${createHash('sha256').update(storedKey, 'utf8').digest('base64url')}`;
}

/** The same hash, for any parts (an execution ARN and a step's operation id), each length-prefixed: never ambiguous. */
export function hashOfParts(prefix: string, ...parts: readonly string[]): string {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(`${Buffer.byteLength(part, 'utf8')}:${part}`, 'utf8');
  return `${prefix}${hash.digest('base64url')}`;
}
