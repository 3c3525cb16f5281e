import type { Context, SQSRecord } from 'aws-lambda';
import type { IdempotencyStore } from '../engine/contract.js';
import { type RunOutcome, runIdempotently } from '../engine/run.js';
import type { StepObserver } from '../engine/steps.js';
import { type RecordIdentity, type RecordIdentityOptions, recordIdentity } from './identity.js';
import type { SqsRecordContext } from './record-context.js';

/** The function that does a record's work. What it returns is stored, as JSON, and handed back on replays. */
export type SqsRecordFunction<TSummary, TEffect> = (
  record: SQSRecord,
  context: SqsRecordContext<TEffect>,
) => Promise<TSummary>;

export interface ProcessRecordOptions<TSummary, TEffect> extends RecordIdentityOptions {
  readonly process: SqsRecordFunction<TSummary, TEffect>;
  /**
   * When another consumer holds the key, wait up to this long for it to finish (and replay its result) before
   * answering `in_flight`. Default 0. Waiting holds up the batch: keep it well inside the function's timeout.
   */
  readonly inFlightWaitMs?: number;
  /**
   * Track each record's operation in the store's recovery set until it completes (see `IdempotencyStore.findDue`),
   * for work whose effect lives in another system: a record whose every delivery failed after the effect is still
   * finished, or given up, by recovery. Default false.
   */
  readonly recoverable?: boolean;
  /** The invocation's context: the lease covers its remaining time, and waits end within it. */
  readonly lambdaContext?: Context;
  /** Told once when the store's lease is raised to cover the invocation's remaining time. Default `console`. */
  readonly logger?: { warn(message: string, details: Record<string, unknown>): void };
  /**
   * Told each step's outcome (`context.step`), as it happens: count them under `StepMetric`'s names, as the HTTP
   * middleware does with its `metrics`.
   */
  readonly onStep?: StepObserver;
}

/**
 * What became of one record. Expected cases are values; only the unexpected (the store unreachable, no usable key)
 * throws.
 *
 * - `committed`: the function ran and its staged effects committed with the key's completion.
 * - `replay`: the key was already completed; the function did not run. `summary` is the stored one.
 * - `in_flight`: another consumer holds a live lease on the key; the function did not run.
 * - `mismatch`: the key was used for a message with another body (only with `fingerprintBody` or `fingerprint`).
 * - `fenced`: the function ran, but this lease was taken over before the commit; nothing was written.
 * - `failed`: the function (or the commit) threw; nothing was written, and the key was released (`released`) so
 *   that a redelivery takes it over at once, under the same downstream key.
 */
export type RecordOutcome<TSummary> =
  | {
      readonly kind: 'committed';
      readonly key: string;
      readonly summary: TSummary;
      readonly downstreamKey: string;
      readonly attempt: number;
    }
  | { readonly kind: 'replay'; readonly key: string; readonly summary: TSummary }
  | Exclude<RunOutcome<TSummary>, { kind: 'committed' | 'replay' }>;

/**
 * Processes one SQS record at most once per key: claim the key, run the function, commit its staged effects with
 * the key's completion (or release the key if it threw). The building block of {@link makeSqsIdempotentHandler};
 * use it directly to drive records your own way.
 *
 * @example
 * const outcome = await processRecordIdempotently(store, record, {
 *   name: 'orders-fulfilment',
 *   key: byBodyField('orderId'),
 *   process: async (record, ctx) => {
 *     const order = JSON.parse(record.body);
 *     await warehouse.reserve(order, { idempotencyKey: ctx.downstreamKey });
 *     ctx.stage({ Put: { TableName: 'orders', Item: { pk: `ORDER#${order.orderId}`, sk: 'RESERVED' } } });
 *     return { reserved: order.items.length };
 *   },
 * });
 * if (outcome.kind === 'replay') console.log('already done', outcome.summary);
 *
 * @throws {InvalidRecordKeyError} the record has no usable key.
 */
export async function processRecordIdempotently<TSummary, TEffect>(
  store: IdempotencyStore<TEffect>,
  record: SQSRecord,
  options: ProcessRecordOptions<TSummary, TEffect>,
): Promise<RecordOutcome<TSummary>> {
  return processIdentifiedRecord(store, record, recordIdentity(record, options), options);
}

/**
 * {@link processRecordIdempotently} for a record whose identity is already known: the batch handler needs the key
 * first, to run records that share it one after the other.
 *
 * @internal the batch handler's; left out of the published declarations (not exported by the package either).
 */
export async function processIdentifiedRecord<TSummary, TEffect>(
  store: IdempotencyStore<TEffect>,
  record: SQSRecord,
  identity: RecordIdentity,
  options: ProcessRecordOptions<TSummary, TEffect>,
): Promise<RecordOutcome<TSummary>> {
  const outcome = await runIdempotently<TSummary, TEffect>(
    store,
    identity,
    (handle, lease) =>
      options.process(record, {
        ...handle,
        record,
        receiveCount: Number(record.attributes.ApproximateReceiveCount ?? 1),
        lease,
        lambdaContext: options.lambdaContext,
      }),
    {
      waitMs: options.inFlightWaitMs ?? 0,
      recoverable: options.recoverable ?? false,
      ...(options.lambdaContext ? { invocation: options.lambdaContext } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.onStep ? { onStep: options.onStep } : {}),
    },
  );
  switch (outcome.kind) {
    case 'committed':
      return {
        kind: 'committed',
        key: outcome.key,
        summary: outcome.result,
        downstreamKey: outcome.downstreamKey,
        attempt: outcome.attempt,
      };
    case 'replay':
      return { kind: 'replay', key: outcome.key, summary: outcome.result };
    default:
      return outcome;
  }
}
