import { createHash, randomBytes } from 'node:crypto';

/**
 * API keys map to accounts. Only a SHA-256 of each key is stored: a leaked table yields no usable key. (A fast hash
 * is right here, unlike for passwords: keys are 32 random bytes, so there is nothing to brute-force.)
 */
export function hashApiKey(apiKey: string): string {
  return createHash('sha256').update(apiKey).digest('hex');
}

export function generateApiKey(): string {
  return `sk_test_${randomBytes(24).toString('base64url')}`;
}

/** Where API keys are looked up (by the authorizer) and registered (by whoever issues them). */
export interface ApiKeyDirectory {
  /** The account an API key belongs to, or undefined for an unknown or revoked key. */
  accountFor(apiKey: string): Promise<string | undefined>;
  register(apiKey: string, accountId: string): Promise<void>;
}

/** Parses `key1:acct_1,key2:acct_2` (LOCAL_API_KEYS). */
export function parseApiKeyList(list: string): { apiKey: string; accountId: string }[] {
  return list
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean)
    .map((entry) => {
      const separator = entry.lastIndexOf(':');
      if (separator <= 0 || separator === entry.length - 1) {
        throw new Error(`LOCAL_API_KEYS entry ${JSON.stringify(entry)} is not of the form key:account`);
      }
      return { apiKey: entry.slice(0, separator), accountId: entry.slice(separator + 1) };
    });
}
