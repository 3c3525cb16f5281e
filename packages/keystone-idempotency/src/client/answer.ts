import { InvalidResponse, type Problem } from './result.js';

/** Statuses that carry no content by definition: their body is `undefined`, not an empty document to refuse. */
const NO_CONTENT_STATUSES = new Set([204, 205]);

/** A 2xx body, read; or why it could not be. */
export type ReadBody<T> =
  | { readonly ok: true; readonly body: T }
  | { readonly ok: false; readonly reason: InvalidResponse; readonly detail: string };

/**
 * Reads a 2xx answer's body as JSON and hands it to `parse`, which returns what the caller's endpoint answers or
 * throws for anything else. Never throws itself: an empty body, a body that isn't JSON and a body `parse` refuses
 * are each an answer to report, not an exception for the caller to catch (a 201 with an empty body once made the
 * client throw `SyntaxError`, and a 200 with `null` once passed for a success).
 */
export function readBody<T>(status: number, text: string, parse: (body: unknown) => T): ReadBody<T> {
  let body: unknown;
  if (NO_CONTENT_STATUSES.has(status)) {
    body = undefined;
  } else if (text.trim() === '') {
    return { ok: false, reason: InvalidResponse.emptyBody, detail: `the ${status} answer has no body` };
  } else {
    try {
      body = JSON.parse(text);
    } catch {
      return { ok: false, reason: InvalidResponse.notJson, detail: `the ${status} answer's body is not JSON` };
    }
  }
  try {
    return { ok: true, body: parse(body) };
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return { ok: false, reason: InvalidResponse.rejected, detail: `the ${status} answer's body was refused: ${why}` };
  }
}

/** The problem+json body; a body that isn't one (a proxy's HTML error page, say) becomes a minimal problem. */
export async function readProblem(response: Response): Promise<Problem> {
  const fallback: Problem = {
    type: 'about:blank',
    title: response.statusText || `HTTP ${response.status}`,
    status: response.status,
  };
  let body: unknown;
  try {
    body = await response.json();
  } catch {
    return fallback;
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return fallback;
  const fields = body as Record<string, unknown>;
  return {
    ...fields,
    type: typeof fields.type === 'string' ? fields.type : fallback.type,
    title: typeof fields.title === 'string' ? fields.title : fallback.title,
    status: typeof fields.status === 'number' ? fields.status : fallback.status,
  };
}
