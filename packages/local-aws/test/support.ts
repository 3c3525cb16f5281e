import { request } from 'node:http';
import type { LocalLog } from '../src/log';

/** A log that keeps what it was told, so a test can check an error went to the log and not to the client. */
export function recordingLog(): LocalLog & { errors: { message: string; details?: Record<string, unknown> }[] } {
  const errors: { message: string; details?: Record<string, unknown> }[] = [];
  return {
    errors,
    info: () => undefined,
    error: (message, details) => {
      errors.push({ message, details });
    },
  };
}

export interface RawResponse {
  status: number;
  rawHeaders: string[];
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/**
 * An HTTP request through node:http rather than fetch: fetch lowercases header names and merges repeated headers,
 * and these tests need to send `X-Custom-Header` twice, exactly as written.
 */
export function rawRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string | string[]>; body?: Buffer | string } = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? 'GET', headers: options.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          rawHeaders: res.rawHeaders,
          headers: res.headers,
          body: Buffer.concat(chunks),
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** Polls until `check` returns a value, or fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
