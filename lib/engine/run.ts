import type { ClaimOptions, IdempotencyStore } from './contract.js';
import { LeaseLostError } from './errors.js';
import { ClaimedOperation, type IdempotencyHandle } from './operation.js';
import type { IdempotencyRecord, Lease, StoredResponse } from './record.js';
import { resultOf, storedResult } from './result.js';

/** What an operation is known by: its stored (scoped) key, and the fingerprint that says "the same input". */
export interface OperationIdentity {
  readonly key: string;
  readonly fingerprint: string;
}

/** The work of one operation. What it returns is stored as JSON and handed back on replays. */
export type OperationWork<TResult, TEffect> = (handle: IdempotencyHandle<TEffect>, lease: Lease) => Promise<TResult>;

/**
 * What became of one run. Expected cases are values; only the unexpected (the store unreachable) throws.
 *
 * - `committed`: the work ran and its staged effects committed with the key's completion.
 * - `replay`: the key was already completed; the work did not run. `result` is the stored one (JSON, parsed).
 * - `in_flight`: another owner holds a live lease on the key; the work did not run.
 * - `mismatch`: the key was used with another fingerprint; the work did not run.
 * - `fenced`: the work ran, but this lease was taken over before the commit; nothing was written.
 * - `failed`: the work (or the commit) threw; nothing was written, and the key was released (`released`) so that
 *   the next attempt takes it over at once, under the same downstream key.
 */
export type RunOutcome<TResult> =
  | {
      readonly kind: 'committed';
      readonly key: string;
      readonly result: TResult;
      readonly downstreamKey: string;
      readonly attempt: number;
    }
  | { readonly kind: 'replay'; readonly key: string; readonly result: TResult; readonly record: IdempotencyRecord }
  | {
      readonly kind: 'in_flight';
      readonly key: string;
      readonly retryAfterMs: number;
      readonly record: IdempotencyRecord;
    }
  | { readonly kind: 'mismatch'; readonly key: string; readonly record: IdempotencyRecord }
  | { readonly kind: 'fenced'; readonly key: string; readonly error: LeaseLostError }
  | { readonly kind: 'failed'; readonly key: string; readonly error: unknown; readonly released: boolean };

/**
 * The whole lifecycle of one operation, for adapters that run the work themselves (the SQS adapter,
 * {@link makeIdempotent}): claim the key, run the work with its handle, commit what it staged with the key's
 * completion, or release the key if it threw. (The HTTP middleware splits the same steps over middy's `before`,
 * `after` and `onError`, through the same {@link ClaimedOperation}.)
 *
 * @example
 * const outcome = await runIdempotently(store, { key, fingerprint }, async (idempotency) => {
 *   const shipment = await carrier.book(order, { idempotencyKey: idempotency.downstreamKey });
 *   idempotency.stage({ Put: { TableName: 'shipments', Item: shipmentRow(shipment) } });
 *   return { shipmentId: shipment.id };
 * });
 */
export async function runIdempotently<TResult, TEffect>(
  store: IdempotencyStore<TEffect>,
  identity: OperationIdentity,
  work: OperationWork<TResult, TEffect>,
  options: ClaimOptions = {},
): Promise<RunOutcome<TResult>> {
  const { key } = identity;
  const claimed = await store.claim(key, identity.fingerprint, options);
  switch (claimed.kind) {
    case 'replay':
      return { kind: 'replay', key, result: resultOf<TResult>(claimed.response), record: claimed.record };
    case 'in_flight':
      return { kind: 'in_flight', key, retryAfterMs: claimed.retryAfterMs, record: claimed.record };
    case 'mismatch':
      return { kind: 'mismatch', key, record: claimed.record };
  }
  const operation = new ClaimedOperation(store, claimed.lease);
  let result: TResult;
  let response: StoredResponse;
  try {
    result = await work(operation.handle, claimed.lease);
    // A result with no JSON form (a BigInt, a cycle) fails here, before anything is written: like any failure.
    response = storedResult(result);
  } catch (error) {
    return failed(operation, error);
  }
  try {
    await operation.commit(response);
  } catch (error) {
    // Fenced: another owner holds the key now; it is not ours to release, and nothing of ours was written.
    if (error instanceof LeaseLostError) return { kind: 'fenced', key, error };
    return failed(operation, error);
  }
  return { kind: 'committed', key, result, downstreamKey: claimed.lease.downstreamKey, attempt: claimed.lease.attempt };
}

/**
 * Gives the key back after a failure, so the next attempt takes it over at once rather than waiting out the lease.
 * The record keeps its downstream key: whatever this attempt did outside is found again under the same key.
 * Release is conditioned on still owning an in-progress record, so after a commit whose reply was lost (but which
 * did commit) it changes nothing.
 */
async function failed<TEffect>(
  operation: ClaimedOperation<TEffect>,
  error: unknown,
): Promise<Extract<RunOutcome<never>, { kind: 'failed' }>> {
  let released = false;
  try {
    released = await operation.release();
  } catch {
    // Unreachable store: the lease runs out instead, and the next attempt takes the key over then.
  }
  return { kind: 'failed', key: operation.lease.key, error, released };
}
