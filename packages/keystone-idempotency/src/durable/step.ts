import {
  type DurableContext,
  type DurablePromise,
  type RetryDecision,
  retryPresets,
  type StepConfig,
  type StepFunc,
} from '@aws/durable-execution-sdk-js';
import type { IdempotencyStore } from '../engine/contract.js';
import { StepUsageError } from '../engine/errors.js';
import { fingerprint } from '../engine/fingerprint.js';
import type { IdempotencyHandle } from '../engine/operation.js';
import { runIdempotently } from '../engine/run.js';
import { DuplicateStepNameError, StepInFlightError } from './errors.js';
import { hashOfParts } from './execution-name.js';
import { assertStepIdentity, runningStepId, StepIdentityError } from './step-identity.js';

/** What a step's work sees: the engine's handle, with a downstream key of the execution and step, and the SDK's own. */
export interface DurableStepHandle<TEffect> extends IdempotencyHandle<TEffect> {
  /**
   * The key to forward to the outside system: derived from the execution's ARN and the step's operation id, so it is
   * the same on every replay and every retry of this step, in every invocation, however long the execution lasts
   * (even past the store's TTL), and different for every other step and execution.
   */
  readonly downstreamKey: string;
  readonly executionArn: string;
  /**
   * The SDK's id of this step (`Operation.Id` in the execution's history): its place in the execution's tree of
   * contexts, so items of a map, parallel branches and child contexts that use one name each have their own.
   */
  readonly operationId: string;
  readonly stepName: string;
  /** The SDK's step context (its logger, its 1-based `attempt`). */
  readonly stepContext: Parameters<StepFunc<unknown>>[0];
}

export interface IdempotentStepOptions<TResult, TEffect> {
  /** Where the step's claim and its local writes commit (a `DynamoDbStore`, a `PostgresStore`). */
  readonly store: IdempotencyStore<TEffect>;
  /**
   * The SDK's step options. `retryStrategy` (default `retryPresets.default`) decides for the work's own errors; a
   * step found held by an earlier attempt ({@link StepInFlightError}) is always retried once that attempt's lease has
   * run out, up to `inFlightRetries` times.
   */
  readonly config?: StepConfig<TResult>;
  /** How many times to come back for a step an earlier attempt still holds. Default 10. */
  readonly inFlightRetries?: number;
}

/** Names used by idempotentStep in each durable context (a new one per invocation and per run of a child context). */
const namesUsed = new WeakMap<object, Set<string>>();

/** What Lambda takes as an operation's name (`OperationUpdate.Name`): 1 to 256 printable ASCII characters. */
const STEP_NAME = /^[\x20-\x7E]{1,256}$/;

/**
 * A durable step whose outside effect happens once and whose local writes commit once, although the SDK runs a step
 * at least once (a step that did its work and crashed before its checkpoint runs again on replay, and a step that
 * threw is retried):
 *
 * ```
 *  context.step(name) ─► claim key(execution ARN, the SDK's operation id of the step) on the store
 *      ├─ acquired: work(handle) ─► outside call with handle.downstreamKey ─► stage local writes
 *      │     └─ commit: the writes and the step's result, one transaction        ─► the SDK checkpoints the result
 *      ├─ completed before (the step ran, then crashed before its checkpoint) ─► the stored result; nothing runs
 *      └─ held by an earlier attempt still leased ─► StepInFlightError; the SDK retries after the lease
 * ```
 *
 * The claim is the SDK's own step, its place in the execution's tree of contexts: the items of a `map`, the branches
 * of a `parallel` and child contexts may use one name, each with its own claim. Within one context each name is used
 * once ({@link DuplicateStepNameError}); a name is what Lambda takes, 1 to 256 printable ASCII characters
 * (`StepUsageError`, `invalid_name`). A step's result must be JSON (it is stored, then checkpointed).
 *
 * @example
 * const charge = await idempotentStep(context, 'charge', async (step) => {
 *   const charge = await processor.charge(order, { idempotencyKey: step.downstreamKey });
 *   step.stage({ Put: { TableName: 'orders', Item: { pk: order.id, chargeId: charge.id } } });
 *   return { chargeId: charge.id };
 * }, { store });
 */
export function idempotentStep<TResult, TEffect>(
  context: DurableContext,
  name: string,
  work: (step: DurableStepHandle<TEffect>) => Promise<TResult>,
  options: IdempotentStepOptions<TResult, TEffect>,
): DurablePromise<TResult> {
  if (!STEP_NAME.test(name)) {
    throw new StepUsageError(
      name,
      'invalid_name',
      `an idempotentStep name is 1 to 256 printable ASCII characters, as Lambda takes it; got ${JSON.stringify(name)}`,
    );
  }
  assertStepIdentity(context);
  const used = namesUsed.get(context) ?? new Set<string>();
  namesUsed.set(context, used);
  if (used.has(name)) throw new DuplicateStepNameError(name);
  used.add(name);
  const executionArn = context.executionContext.durableExecutionArn;
  const fallback = options.config?.retryStrategy ?? retryPresets.default;
  const inFlightRetries = options.inFlightRetries ?? 10;

  return context.step(
    name,
    async (stepContext) => {
      // Read before any await: on a runtime without AsyncLocalStorage the SDK forgets the running step at the first.
      const operationId = runningStepId(context, name);
      const key = hashOfParts('durable-step:', executionArn, operationId);
      const downstreamKey = hashOfParts('dstep_', executionArn, operationId);
      const outcome = await runIdempotently<TResult, TEffect>(
        options.store,
        // The key names the step; its name is fingerprinted, so a step found under another name is a mismatch.
        { key, fingerprint: fingerprint({ operation: 'durable-step', body: name, contentType: 'text/plain' }) },
        (handle) =>
          work(
            // Everything the engine's handle holds (its staging, whatever it gains), with the step's own key.
            Object.freeze({ ...handle, downstreamKey, executionArn, operationId, stepName: name, stepContext }),
          ),
        { invocation: context.lambdaContext },
      );
      switch (outcome.kind) {
        case 'committed':
        case 'replay':
          return outcome.result;
        case 'in_flight':
          throw new StepInFlightError(key, outcome.leaseRemainingMs, outcome.record);
        case 'fenced':
          // An attempt that outlived its lease was taken over: the new owner finishes it; come back for its result.
          throw new StepInFlightError(key, 1000, outcome.error.record);
        case 'mismatch':
          throw new Error(`durable step ${name}: the stored step has another fingerprint`);
        case 'failed':
          throw outcome.error;
      }
    },
    {
      ...options.config,
      retryStrategy: (error: Error, attempt: number): RetryDecision => {
        if (error instanceof StepIdentityError || error.name === 'StepIdentityError') return { shouldRetry: false };
        if (error instanceof StepInFlightError || (error as { name?: string }).name === 'StepInFlightError') {
          const ms = error instanceof StepInFlightError ? error.retryAfterMs : 1000;
          return { shouldRetry: attempt <= inFlightRetries, delay: { seconds: Math.max(1, Math.ceil(ms / 1000)) } };
        }
        return fallback(error, attempt);
      },
    },
  );
}
