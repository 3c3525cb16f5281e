import type { StoredResponse } from '../engine/record.js';

/**
 * A record's result, as the engine stores it: the record function's small JSON summary in the body of a 200
 * "response". Nobody reads it over HTTP; it is what a replay hands back instead of running the function again.
 */
export function summaryResponse(summary: unknown): StoredResponse {
  // `undefined` (a function that returns nothing) has no JSON form: store null.
  return { statusCode: 200, body: JSON.stringify(summary) ?? 'null', headers: {} };
}

/** The summary a replay hands back: the stored JSON, parsed (so a Date comes back as its ISO string). */
export function summaryOf<TSummary>(response: StoredResponse): TSummary {
  return JSON.parse(response.body) as TSummary;
}
