import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';

/** What identifies "the same request" under one key: the body, and the operation it was sent to. */
export interface FingerprintInput {
  readonly operation: string;
  /** The raw request body (already base64-decoded if the gateway encoded it), or null when there is none. */
  readonly body: string | null | undefined;
  /** Content-Type: a JSON body is canonicalized; anything else is hashed byte for byte. */
  readonly contentType?: string | undefined;
}

const JSON_CONTENT_TYPE = /^application\/([a-z0-9.+-]+\+)?json\b/i;

/**
 * SHA-256 (hex) of the canonical form of a request.
 *
 * A JSON body is canonicalized with RFC 8785 (JCS): member order, whitespace and number spelling (`1e3` vs
 * `1000`) never cause a mismatch. A body that claims JSON but doesn't parse, or any other content type, is hashed
 * as its exact bytes. Note: JSON numbers beyond IEEE-754 double precision compare as their nearest double, as they
 * do in every JavaScript JSON consumer.
 */
export function fingerprint(input: FingerprintInput): string {
  const hash = createHash('sha256');
  hash.update(`${input.operation}\n`);
  hash.update(canonicalBody(input.body ?? '', input.contentType));
  return hash.digest('hex');
}

function canonicalBody(body: string, contentType: string | undefined): string {
  const looksJson = contentType === undefined ? /^\s*[[{]/.test(body) : JSON_CONTENT_TYPE.test(contentType);
  if (!looksJson || body.trim().length === 0) return `raw:${body}`;
  try {
    return `json:${canonicalize(JSON.parse(body)) ?? ''}`;
  } catch {
    return `raw:${body}`;
  }
}
