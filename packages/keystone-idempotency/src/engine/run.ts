import { LEASE_MARGIN_MS } from './clock.js';
import type { ClaimOptions, IdempotencyStore } from './contract.js';
import { ContendedError, type LeaseLostError } from './errors.js';
import { ClaimedOperation, type IdempotencyHandle, type Settlement } from './operation.js';
import type { IdempotencyRecord, Lease, StoredResponse } from './record.js';
import { resultOf, storedResult } from './result.js';
import { refusalOf } from './step-runner.js';
import type { StepObserver } from './steps.js';
import { idempotencyDisabled, unrecordedOperation } from './switch.js';

/**
 * The one lifecycle of an idempotent operation, which every adapter is a thin skin over:
 *
 * ```
 *  beginOperation ──► replay | in_flight | mismatch            (answered without running anything)
 *        │
 *        └─ acquired: ClaimedOperation ──► the work ──► operation.settle(end)
 *                                                          ├─ an outcome: commit it with the staged effects
 *                                                          │    └─ fenced: our lease was taken over, nothing written
 *                                                          └─ transient (or the commit failed): release the key
 * ```
 *
 * `runIdempotently` runs all of it around a function (the SQS adapter, `makeIdempotent`); the HTTP middleware splits
 * the same two calls over middy's `before` and `after`/`onError`. The rules live here once: how long a duplicate may
 * wait, how long a lease must be for the function it runs in, what a contended key answers.
 */

/** What an operation is known by: its stored (scoped) key, and the fingerprint that says "the same input". */
export interface OperationIdentity {
  readonly key: string;
  readonly fingerprint: string;
}

/** The work of one operation. What it returns is stored as JSON and handed back on replays. */
export type OperationWork<TResult, TEffect> = (handle: IdempotencyHandle<TEffect>, lease: Lease) => Promise<TResult>;

/** The part of a Lambda context the lifecycle reads: how long the invocation has left. */
export interface InvocationTime {
  getRemainingTimeInMillis?(): number;
}

export interface LifecycleOptions {
  /**
   * Wait up to this long for an in-flight original to finish (and replay its result) instead of answering
   * `in_flight` at once. Bounded by the invocation's remaining time, less `WAIT_MARGIN_MS` (1 s). Default 0.
   */
  readonly waitMs?: number;
  /**
   * Track the operation in the store's recovery set until it completes or is abandoned: for work whose effect lives
   * in another system, so that an attempt whose caller never returns is still finished, or given up, by recovery.
   */
  readonly recoverable?: boolean;
  /**
   * The Lambda context the operation runs in. Its remaining time bounds how long a duplicate waits, and the claim's
   * lease covers it (plus {@link LEASE_MARGIN_MS}): a lease that ran out while its owner still worked would let a
   * duplicate take over and do the work a second time.
   */
  readonly invocation?: InvocationTime;
  /** Told once per store when a lease is raised to cover an invocation's remaining time. Default `console`. */
  readonly logger?: { warn(message: string, details: Record<string, unknown>): void };
  /** Told each step's outcome (`handle.step`), as it happens: count them under `StepMetric`'s names. */
  readonly onStep?: StepObserver;
}

/**
 * A duplicate stops waiting this long before its invocation would end, to answer while it still can.
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export const WAIT_MARGIN_MS = 1000;

/** What a contended key (writers kept colliding on it) suggests to come back after: a duplicate in flight. */
const CONTENDED_RETRY_MS = 1000;

/** Stores already told that a lease was raised: a misconfiguration is logged once per container, not per call. */
const raisedLeaseNoticed = new WeakSet<object>();

/**
 * What a claim found. Expected cases are values; only the unexpected (the store unreachable) throws.
 * `in_flight` covers a key contended by concurrent writers too (no record then): either way, come back later.
 */
export type Began<TEffect> =
  | { readonly kind: 'acquired'; readonly operation: ClaimedOperation<TEffect> }
  | {
      readonly kind: 'replay';
      readonly key: string;
      readonly response: StoredResponse;
      readonly record: IdempotencyRecord;
    }
  | {
      readonly kind: 'in_flight';
      readonly key: string;
      /** A short delay to suggest to a client: most originals finish long before their lease. */
      readonly retryAfterMs: number;
      /** When the owner has finished or can be taken over: what a queue should wait before redelivering. */
      readonly leaseRemainingMs: number;
      /** The owner's record; undefined when the key was contended and no record could be read. */
      readonly record: IdempotencyRecord | undefined;
    }
  | { readonly kind: 'mismatch'; readonly key: string; readonly record: IdempotencyRecord };

/**
 * Claims the operation's key for this invocation: the first half of the lifecycle. Acquired, it hands back the
 * {@link ClaimedOperation} whose `settle` is the second half.
 */
export async function beginOperation<TEffect>(
  store: IdempotencyStore<TEffect>,
  identity: OperationIdentity,
  options: LifecycleOptions = {},
): Promise<Began<TEffect>> {
  const { key } = identity;
  // Switched off for a unit test: the work runs every time, and nothing is recorded.
  if (idempotencyDisabled()) return { kind: 'acquired', operation: unrecordedOperation(store, identity) };
  let claimed: Awaited<ReturnType<IdempotencyStore<TEffect>['claim']>>;
  try {
    claimed = await store.claim(key, identity.fingerprint, claimOptions(store, options));
  } catch (error) {
    if (!(error instanceof ContendedError)) throw error;
    // Writers kept colliding on the record: nothing of ours was written, and someone else holds or is taking it.
    return {
      kind: 'in_flight',
      key,
      retryAfterMs: CONTENDED_RETRY_MS,
      leaseRemainingMs: CONTENDED_RETRY_MS,
      record: undefined,
    };
  }
  switch (claimed.kind) {
    case 'acquired':
      return {
        kind: 'acquired',
        operation: new ClaimedOperation(store, claimed.lease, options.onStep ? { onStep: options.onStep } : {}),
      };
    case 'replay':
      return { kind: 'replay', key, response: claimed.response, record: claimed.record };
    case 'in_flight':
      return {
        kind: 'in_flight',
        key,
        retryAfterMs: claimed.retryAfterMs,
        leaseRemainingMs: claimed.leaseRemainingMs,
        record: claimed.record,
      };
    case 'mismatch':
      return { kind: 'mismatch', key, record: claimed.record };
  }
}

/**
 * The claim's options for this invocation: a wait that ends while the invocation can still answer, and a lease that
 * outlasts the invocation. A store lease shorter than that is raised for the claim (and said once), never used.
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export function claimOptions<TEffect>(store: IdempotencyStore<TEffect>, options: LifecycleOptions): ClaimOptions {
  const remaining = options.invocation?.getRemainingTimeInMillis?.();
  const known = typeof remaining === 'number' && Number.isFinite(remaining);
  const waitMs = Math.max(
    0,
    Math.min(options.waitMs ?? 0, known ? remaining - WAIT_MARGIN_MS : Number.POSITIVE_INFINITY),
  );
  const claim = { waitMs, recoverable: options.recoverable ?? false };
  if (!known) return claim;
  const neededMs = Math.ceil(remaining) + LEASE_MARGIN_MS;
  if (neededMs > store.leaseMs && !raisedLeaseNoticed.has(store)) {
    raisedLeaseNoticed.add(store);
    (options.logger ?? console).warn(
      "the store's lease is shorter than the function's remaining time; each claim's lease is raised to cover it",
      { storeLeaseMs: store.leaseMs, neededMs, marginMs: LEASE_MARGIN_MS },
    );
  }
  return { ...claim, leaseMs: neededMs };
}

/**
 * What became of one run. Expected cases are values; only the unexpected (the store unreachable) throws.
 *
 * - `committed`: the work ran and its staged effects committed with the key's completion.
 * - `replay`: the key was already completed; the work did not run. `result` is the stored one (JSON, parsed).
 * - `in_flight`: another owner holds a live lease on the key (or writers contend for it); the work did not run.
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
  | Extract<Began<never>, { kind: 'in_flight' | 'mismatch' }>
  | { readonly kind: 'fenced'; readonly key: string; readonly error: LeaseLostError }
  | { readonly kind: 'failed'; readonly key: string; readonly error: unknown; readonly released: boolean };

/**
 * The whole lifecycle around a function (the SQS adapter, {@link makeIdempotent}): claim the key, run the work with
 * its handle, commit what it staged with the key's completion, or release the key if it threw.
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
  options: LifecycleOptions = {},
): Promise<RunOutcome<TResult>> {
  const began = await beginOperation(store, identity, options);
  switch (began.kind) {
    case 'replay': {
      // An operation refused for good ends the same way on every call: its first caller got the refusal, so do all.
      const refusal = refusalOf(began.record.progress);
      if (refusal) return { kind: 'failed', key: began.key, error: refusal, released: false };
      return { kind: 'replay', key: began.key, result: resultOf<TResult>(began.response), record: began.record };
    }
    case 'in_flight':
    case 'mismatch':
      return began;
  }
  const { operation } = began;
  let result: TResult;
  let response: StoredResponse;
  try {
    result = await work(operation.handle, operation.lease);
    // A result with no JSON form (a BigInt, a cycle) fails here, before anything is written: like any failure.
    response = storedResult(result);
  } catch (error) {
    return ended(await operation.settle({ kind: 'transient', error }));
  }
  return ended(await operation.settle({ kind: 'outcome', response }), result);

  /**
   * What the attempt's end made of the operation (`result` is the work's, for a commit: a transient end never commits).
   * Refused for good, there is nothing to retry: the refusal is the failure, on this call and every one after.
   */
  function ended(settled: Settlement, result?: TResult): RunOutcome<TResult> {
    const { key } = identity;
    switch (settled.kind) {
      case 'committed':
        return {
          kind: 'committed',
          key,
          result: result as TResult,
          downstreamKey: operation.lease.downstreamKey,
          attempt: operation.lease.attempt,
        };
      case 'fenced':
        return { kind: 'fenced', key, error: settled.error };
      case 'released':
      case 'compensating':
        return { kind: 'failed', key, error: settled.error, released: settled.released };
      case 'refused':
        return { kind: 'failed', key, error: settled.refusal, released: false };
    }
  }
}
