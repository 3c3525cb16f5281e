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

/**
 * The key a selection from an input names (Powertools' `eventKeyJmesPath`, as a function): a string as it is; any
 * other JSON value (a subset of the input: an object, an array, a number) as the SHA-256 of its canonical JSON
 * (RFC 8785), so `{ a, b }` and `{ b, a }` name one key. Undefined when nothing was selected: undefined, null, an
 * empty string, or an object or array holding nothing but those.
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export function selectedKey(selected: unknown): string | undefined {
  if (typeof selected === 'string') return selected.length > 0 ? selected : undefined;
  if (isNothing(selected)) return undefined;
  const canonical = canonicalize(selected);
  if (canonical === undefined) return undefined;
  return `sha256:${createHash('sha256').update(canonical).digest('hex')}`;
}

/**
 * The fingerprint of a selection from an input (Powertools' `payloadValidationJmesPath`, as a function): what must
 * be equal for a second call under the same key to count as the same call, compared canonically.
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export function selectionFingerprint(operation: string, selected: unknown): string {
  return fingerprint({ operation, body: JSON.stringify(selected) ?? null, contentType: 'application/json' });
}

function isNothing(value: unknown): boolean {
  if (value === undefined || value === null || value === '') return true;
  if (typeof value === 'number') return !Number.isFinite(value);
  if (typeof value !== 'object') return false;
  return Object.values(value).every(isNothing);
}
