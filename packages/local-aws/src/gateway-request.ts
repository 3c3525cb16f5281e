import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/**
 * A request as both local gateways receive it (the REST API's and the HTTP API's), before either turns it into its
 * own event: what they read from the socket is the same, what they make of it differs.
 */
export interface GatewayRequest {
  readonly method: string;
  /** Header names and values exactly as received, in order (Node's `rawHeaders`). */
  readonly rawHeaders: readonly string[];
  /** The URL path as sent, still percent-encoded. */
  readonly rawPath: string;
  /** The query string without the `?`, still percent-encoded; empty when none. */
  readonly rawQuery: string;
  readonly body: Buffer;
  readonly sourceIp: string;
  readonly serverPort: number;
  readonly receivedAt: number;
}

/** A header's value by its name, in any case, as API Gateway and Lambda's adapters read one. */
export function header(
  headers: Readonly<Record<string, string | undefined>> | null | undefined,
  name: string,
): string | undefined {
  if (!headers) return undefined;
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) if (key.toLowerCase() === wanted) return value;
  return undefined;
}

export function splitUrl(url: string): { rawPath: string; rawQuery: string } {
  const queryStart = url.indexOf('?');
  if (queryStart === -1) return { rawPath: url, rawQuery: '' };
  return { rawPath: url.slice(0, queryStart), rawQuery: url.slice(queryStart + 1) };
}

/**
 * Reads the whole body, or reports it too large without buffering the rest. The remainder is still drained, so the
 * client gets the 413 instead of a connection reset mid-upload.
 */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer | 'too-large'> {
  const declared = Number(req.headers['content-length'] ?? 0);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = declared > maxBytes;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) tooLarge = true;
      if (!tooLarge) chunks.push(chunk);
    });
    req.on('end', () => resolve(tooLarge ? 'too-large' : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** The bytes as text, or undefined when they are not valid UTF-8. */
export function decodeUtf8(bytes: Buffer): string | undefined {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}

/** A percent-decoded path; a malformed escape is left as sent. */
export function decodePath(rawPath: string): string {
  try {
    return decodeURIComponent(rawPath);
  } catch {
    return rawPath;
  }
}

/** X-Ray's format: `Root=1-<epoch seconds, hex>-<96 random bits, hex>`. */
export function traceId(epochMs: number): string {
  return `Root=1-${Math.floor(epochMs / 1000).toString(16)}-${randomBytes(12).toString('hex')}`;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** API Gateway's request time format (CLF), in both APIs' events: `09/Apr/2015:12:34:56 +0000`. */
export function formatRequestTime(date: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return (
    `${pad(date.getUTCDate())}/${MONTHS[date.getUTCMonth()]}/${date.getUTCFullYear()}:` +
    `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())} +0000`
  );
}
