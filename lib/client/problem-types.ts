import { type PROBLEM_TYPE_BASE, problemType, ProblemType as Slug } from '../http/problem-types.js';

type ProblemTypes = { readonly [Name in keyof typeof Slug]: `${typeof PROBLEM_TYPE_BASE}${(typeof Slug)[Name]}` };

/**
 * The payments API's problem `type`s (RFC 9457) as the full URIs a response carries, to switch on: built from the
 * one list of problem types (lib/http/problem-types.ts, plain data, so the browser bundle takes only that file).
 * They name problems; they are not pages to fetch. The ones the client itself acts on:
 *
 * - `requestInFlight`: the original request with this key is still running: retried after `Retry-After`;
 * - `processorUnavailable`: the processor failed or timed out and the key was released: retried with the same key;
 * - `idempotencyKeyReused`: the key was used with a different body: a client bug, never retried.
 */
export const ProblemType = Object.fromEntries(
  Object.entries(Slug).map(([name, slug]) => [name, problemType(slug)]),
) as ProblemTypes;
export type ProblemType = ProblemTypes[keyof ProblemTypes];
