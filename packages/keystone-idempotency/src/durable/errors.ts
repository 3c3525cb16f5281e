import { IdempotencyError, StepUsageError } from '../engine/errors.js';
import type { IdempotencyRecord } from '../engine/record.js';

/**
 * Lambda already holds an execution under this name, started with another payload
 * (`DurableExecutionAlreadyStartedException`): the same key came back with other input after our record of it expired,
 * while Lambda still keeps the execution. The front door answers 422, as for any reused key.
 */
export class ExecutionNameTakenError extends IdempotencyError {
  constructor(
    readonly executionName: string,
    options?: { cause?: unknown },
  ) {
    super(`a durable execution named ${executionName} already exists with another payload`, options);
    this.name = 'ExecutionNameTakenError';
  }
}

/**
 * An earlier attempt of this durable step still holds the step's claim (it crashed mid-work, or its lease has not run
 * out yet): nothing ran. Thrown out of the step so that the SDK retries it; `idempotentStep`'s retry strategy waits
 * `retryAfterMs` before the next attempt, by when the claim can be taken over under the same downstream key.
 */
export class StepInFlightError extends IdempotencyError {
  constructor(
    readonly key: string,
    readonly retryAfterMs: number,
    readonly record: IdempotencyRecord | undefined,
  ) {
    super(`an earlier attempt of durable step ${key} still holds it; retry in ${retryAfterMs} ms`);
    this.name = 'StepInFlightError';
  }
}

/**
 * Two `idempotentStep` calls in one durable context took the same name, refused before the second runs. Steps in
 * different contexts (items of a map, parallel branches, child contexts) may share a name: each has its own claim.
 * A name Lambda would refuse is a `StepUsageError` too (`invalid_name`).
 */
export class DuplicateStepNameError extends StepUsageError {
  constructor(readonly stepName: string) {
    super(
      stepName,
      'duplicate_name',
      `idempotentStep name ${JSON.stringify(stepName)} is used twice in one durable context: give each step its own`,
    );
    this.name = 'DuplicateStepNameError';
  }
}
