import type { IncomingMessage, ServerResponse } from 'node:http';
import { invalidRequest } from './errors';

/** Bodies above this are refused: the sandbox only ever receives small JSON documents. */
const MAX_BODY_BYTES = 1024 * 1024;

/** Reads the whole request body as UTF-8, refusing oversized ones with a 413. */
export async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw invalidRequest(`Request bodies are limited to ${MAX_BODY_BYTES} bytes.`, 413);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Parses a JSON request body, turning a syntax error into a 400 that the client can act on. */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  const raw = await readBody(req);
  try {
    return JSON.parse(raw);
  } catch {
    throw invalidRequest('The request body is not valid JSON.');
  }
}

/**
 * Writes a JSON response. A response whose client already hung up is skipped: the work behind it has been done
 * (that is the point of the sandbox's hang-up scenarios) and only the answer is lost.
 */
export function sendJson(
  res: ServerResponse,
  statusCode: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  const payload = JSON.stringify(body);
  res.writeHead(statusCode, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(payload),
    ...headers,
  });
  res.end(payload);
}

/** A single request header's value (Node joins or arrays repeated ones; the first one wins here). */
export function headerValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name.toLowerCase()];
  return Array.isArray(value) ? value[0] : value;
}
