import type { StoredResponse } from './record.js';

/**
 * A function's result, as the engine stores it: its JSON in the body of a 200 "response". Nobody reads it over
 * HTTP; it is what a replay hands back instead of running the function again (the SQS adapter's record summaries,
 * {@link makeIdempotent}'s results).
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export function storedResult(result: unknown): StoredResponse {
  // `undefined` (a function that returns nothing) has no JSON form: store null.
  return { statusCode: 200, body: JSON.stringify(result) ?? 'null', headers: {} };
}

/**
 * The result a replay hands back: the stored JSON, parsed (so a Date comes back as its ISO string).
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export function resultOf<TResult>(response: StoredResponse): TResult {
  return JSON.parse(response.body) as TResult;
}
