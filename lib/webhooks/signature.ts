import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Webhook signatures in Stripe's scheme: `Processor-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>`, where the
 * HMAC is keyed with the endpoint secret and covers `${t}.${rawBody}`. Signing the timestamp along with the body
 * is what lets a receiver reject a captured request replayed later: changing `t` breaks the signature.
 *
 * Both functions are pure: the caller passes the clock in, so tests and the sandbox agree on "now".
 */

/** The header that carries the signature. */
export const SIGNATURE_HEADER = 'Processor-Signature';

/** How far a timestamp may drift from the receiver's clock, in either direction, by default: five minutes. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

const SCHEME = 'v1';
const HEX_SHA256 = /^[0-9a-f]{64}$/;
const UNIX_SECONDS = /^\d{1,15}$/;

/** Why a signature was refused. */
export type SignatureFailure = 'missing' | 'malformed' | 'stale' | 'mismatch';

/** The outcome of {@link verifySignature}: the signed timestamp, or the reason for refusing. */
export type SignatureVerification =
  | { readonly ok: true; readonly timestamp: number }
  | { readonly ok: false; readonly reason: SignatureFailure };

/** What {@link verifySignature} needs: the header as received, the exact body bytes, the secret and the time. */
export interface VerifySignatureInput {
  /** The `Processor-Signature` header value, or `undefined` when the request had none. */
  readonly header: string | undefined;
  /** The body exactly as received (before any JSON parsing; decode API Gateway's base64 first). */
  readonly rawBody: string;
  readonly secret: string;
  /** The receiver's clock, in unix seconds. */
  readonly nowSeconds: number;
  readonly toleranceSeconds?: number;
}

/**
 * Signs a webhook body and returns the `Processor-Signature` header value.
 *
 * @example
 * signPayload('{"id":"evt_1"}', 'whsec_test', 1_700_000_000);
 * // => 't=1700000000,v1=5f0c…' (64 hex digits)
 */
export function signPayload(rawBody: string, secret: string, timestampSeconds: number): string {
  if (!Number.isSafeInteger(timestampSeconds) || timestampSeconds < 0) {
    throw new RangeError(`timestampSeconds must be a non-negative integer, got ${timestampSeconds}`);
  }
  return `t=${timestampSeconds},${SCHEME}=${hmacHex(rawBody, secret, timestampSeconds)}`;
}

/**
 * Checks a `Processor-Signature` header against the raw body and the secret.
 *
 * Accepts several `v1=` entries (a sender rotating secrets signs with both) and succeeds if any matches; entries of
 * other schemes are ignored. The signature is checked before the timestamp, so `stale` always means "genuine but
 * outside the tolerance" (a replay or a skewed clock), never a forgery.
 *
 * @example
 * const result = verifySignature({ header, rawBody, secret, nowSeconds: Math.floor(Date.now() / 1000) });
 * if (!result.ok) return { statusCode: 400, body: result.reason };
 */
export function verifySignature(input: VerifySignatureInput): SignatureVerification {
  const { header, rawBody, secret, nowSeconds, toleranceSeconds = DEFAULT_TOLERANCE_SECONDS } = input;
  if (header === undefined || header.trim() === '') return { ok: false, reason: 'missing' };
  const parsed = parseHeader(header);
  if (!parsed) return { ok: false, reason: 'malformed' };
  const expected = Buffer.from(hmacHex(rawBody, secret, parsed.timestamp), 'hex');
  const matches = parsed.signatures.some((candidate) => timingSafeEqual(Buffer.from(candidate, 'hex'), expected));
  if (!matches) return { ok: false, reason: 'mismatch' };
  if (Math.abs(nowSeconds - parsed.timestamp) > toleranceSeconds) return { ok: false, reason: 'stale' };
  return { ok: true, timestamp: parsed.timestamp };
}

function hmacHex(rawBody: string, secret: string, timestampSeconds: number): string {
  return createHmac('sha256', secret).update(`${timestampSeconds}.${rawBody}`, 'utf8').digest('hex');
}

/**
 * Splits `t=…,v1=…[,v1=…]` into its timestamp and v1 signatures. Exactly one `t` is allowed (two would leave it
 * ambiguous which one was signed), at least one `v1`, and every `v1` must be 64 hex digits so that the comparison
 * runs on equal-length buffers.
 */
function parseHeader(header: string): { timestamp: number; signatures: string[] } | undefined {
  const timestamps: string[] = [];
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const separator = part.indexOf('=');
    if (separator <= 0) return undefined;
    const name = part.slice(0, separator).trim();
    const value = part.slice(separator + 1).trim();
    if (name === 't') timestamps.push(value);
    else if (name === SCHEME) signatures.push(value.toLowerCase());
  }
  const [timestamp] = timestamps;
  if (timestamps.length !== 1 || timestamp === undefined || !UNIX_SECONDS.test(timestamp)) return undefined;
  if (signatures.length === 0 || !signatures.every((signature) => HEX_SHA256.test(signature))) return undefined;
  return { timestamp: Number(timestamp), signatures };
}
