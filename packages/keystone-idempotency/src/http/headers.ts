/**
 * One header from a `headers` map, by case-insensitive name (API Gateway passes names as the client sent them). To
 * read a request's header from any front door, multi-value headers included, use `requestHeader(event, name)`.
 */
export function header(
  headers: Record<string, string | undefined> | null | undefined,
  name: string,
): string | undefined {
  if (!headers) return undefined;
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === wanted) return value;
  }
  return undefined;
}

/** A base64-encoded body whose bytes are not UTF-8: it has no honest text form. */
export class BodyEncodingError extends Error {
  constructor() {
    super('the request body is not valid UTF-8');
    this.name = 'BodyEncodingError';
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The raw request body as text, from any front door: each base64-encodes bodies it considers binary (API Gateway
 * by its binary media types, function URLs and ALBs by content type). Decoding is strict: bytes
 * that are not UTF-8 throw `BodyEncodingError` rather than become U+FFFD, which would make two different
 * bodies the same text (and the same fingerprint).
 */
export function rawBody(event: { body?: string | null; isBase64Encoded?: boolean }): string | null {
  if (event.body === null || event.body === undefined) return null;
  if (!event.isBase64Encoded) return event.body;
  try {
    return utf8.decode(Buffer.from(event.body, 'base64'));
  } catch {
    throw new BodyEncodingError();
  }
}

/** The charset a Content-Type declares (`application/json; charset=latin1` → `latin1`), if any. */
export function charsetOf(contentType: string): string | undefined {
  return /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType)?.[1];
}
