import type { IdempotencyRecord, StoredResponse } from './record.js';

/**
 * The engine's error tree. Expected outcomes of a claim (replay, in flight, mismatch) are values, not errors:
 * these are for input the engine refuses and for states the caller must handle.
 */
export class IdempotencyError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'IdempotencyError';
  }
}

/**
 * The client's Idempotency-Key is missing or malformed, or a key (or a part of its scope) holds what no store can keep
 * as it is (`unstorable_characters`: a NUL, a lone surrogate): a 400, never stored.
 */
export class InvalidKeyError extends IdempotencyError {
  constructor(
    message: string,
    readonly reason:
      | 'missing'
      | 'empty'
      | 'too_long'
      | 'invalid_characters'
      | 'malformed_quoted_string'
      | 'unstorable_characters',
  ) {
    super(message);
    this.name = 'InvalidKeyError';
  }
}

/**
 * The record this owner claimed is no longer its own (its lease was taken over after it expired, or it was
 * completed or released). Nothing of this owner's commit was written: fencing worked.
 */
export class LeaseLostError extends IdempotencyError {
  constructor(
    readonly key: string,
    /** The record as the failed write found it (the new owner's, or the completed one), when the store read it back. */
    readonly record: IdempotencyRecord | undefined,
    options?: { cause?: unknown },
  ) {
    super(`the lease on ${key} is no longer held by this owner`, options);
    this.name = 'LeaseLostError';
  }
}

/**
 * Another owner holds a live lease on the key: the work did not run. Come back after `retryAfterMs`; by then the
 * original has usually committed, and the same call replays its result.
 */
export class OperationInFlightError extends IdempotencyError {
  constructor(
    readonly key: string,
    readonly retryAfterMs: number,
    /** The record found: the original's, in progress (undefined when writers contended for the key). */
    readonly record: IdempotencyRecord | undefined,
  ) {
    super(`another call holds ${key}; retry in ${retryAfterMs} ms`);
    this.name = 'OperationInFlightError';
  }
}

/** The key was already used for a different input (another fingerprint): the caller reused a key by mistake. */
export class KeyReusedError extends IdempotencyError {
  constructor(
    readonly key: string,
    /** The record found: the operation the key was first used for. */
    readonly record: IdempotencyRecord,
  ) {
    super(`${key} was already used with a different input`);
    this.name = 'KeyReusedError';
  }
}

/** More effects staged than the store commits in one transaction next to the key's completion (its `maxEffects`). */
export class TooManyEffectsError extends IdempotencyError {
  constructor(readonly limit: number) {
    super(`at most ${limit} effects can commit with one record (one transaction)`);
    this.name = 'TooManyEffectsError';
  }
}

/**
 * An effect was staged after the work returned (a promise left running, a callback called late): the commit was
 * already built without it, so it would be lost without a word. Refused loudly instead.
 */
export class StagingClosedError extends IdempotencyError {
  constructor(readonly key: string) {
    super(`stage() was called for ${key} after the work returned; the item was not staged`);
    this.name = 'StagingClosedError';
  }
}

/**
 * An effect that is not the store's kind: SQL staged through a DynamoDB store, a DynamoDB transaction item through a
 * PostgreSQL store, or anything else the store cannot write. The types refuse it at the staging line under `strict`;
 * this is the same refusal for JavaScript callers and casts, made by `stage()` and again by `commit()` before
 * anything is written. `index` is the effect's position in the operation's effects.
 */
export class EffectKindError extends IdempotencyError {
  constructor(
    readonly index: number,
    message: string,
  ) {
    super(message);
    this.name = 'EffectKindError';
  }
}

/**
 * One of the caller's own effects failed its condition (a DynamoDB item's condition expression, a PostgreSQL
 * statement's expected row count or constraint), so the transaction (and the key's completion) was cancelled.
 * `index` is the position in the caller's effect list; `item` what the store reported about it, if anything.
 */
export class EffectConditionFailedError extends IdempotencyError {
  constructor(
    readonly index: number,
    readonly item: Record<string, unknown> | undefined,
    options?: { cause?: unknown },
  ) {
    super(`effect ${index} failed its condition; nothing was written`, options);
    this.name = 'EffectConditionFailedError';
  }
}

/**
 * A response too large for the store's record (its `maxResponseBytes`): a configuration problem, caught before writing
 * anything.
 */
export class ResponseTooLargeError extends IdempotencyError {
  constructor(
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`the response to store is ${bytes} bytes, over the ${limit}-byte limit of an idempotency record`);
    this.name = 'ResponseTooLargeError';
  }
}

/** The engine was configured inconsistently (for example a lease shorter than a second). */
export class ConfigurationError extends IdempotencyError {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigurationError';
  }
}

/**
 * The store kept reporting conflicting writes on the record (concurrent writers on one key) until it gave up. The
 * operation changed nothing; the caller may treat it as "in flight" and retry.
 */
export class ContendedError extends IdempotencyError {
  constructor(key: string, options?: { cause?: unknown }) {
    super(`the record ${key} is contended by concurrent transactions`, options);
    this.name = 'ContendedError';
  }
}

/**
 * Root of the natural-idempotency helpers' errors, each store's (`putIfAbsent`, `compareAndSet` and `upsert` of
 * `keystone-idempotency/dynamodb` and of `keystone-idempotency/postgres`). The expected outcomes (created or exists,
 * changed or unchanged or missing) are values; these are for requests refused before anything is sent.
 */
export class NaturalIdempotencyError extends IdempotencyError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NaturalIdempotencyError';
  }
}

/** The request can't express what the helper promises (for example a key attribute among the values to set). */
export class InvalidNaturalRequestError extends NaturalIdempotencyError {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidNaturalRequestError';
  }
}

/**
 * Root of the errors about recovery points (`IdempotencyHandle.step`): refusals made before anything is written,
 * and the states a step's operation must handle.
 */
export class StepError extends IdempotencyError {
  constructor(
    /** The step's name. */
    readonly step: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StepError';
  }
}

/**
 * `step()` used in a way the engine can't checkpoint, refused before the step runs: a name that is empty, longer than
 * 64 characters or outside `[A-Za-z0-9_.-]`; the same name twice in one run; a step started while another runs (steps
 * are sequential: `await` each); a step after the work returned; a store without checkpoints.
 */
export class StepUsageError extends StepError {
  constructor(
    step: string,
    readonly reason: 'invalid_name' | 'duplicate_name' | 'concurrent' | 'closed' | 'unsupported',
    message: string,
  ) {
    super(step, message);
    this.name = 'StepUsageError';
  }
}

/** More steps than one operation's record holds (the store's `maxSteps`), refused before the step runs. */
export class TooManyStepsError extends StepError {
  constructor(
    step: string,
    readonly limit: number,
  ) {
    super(step, `at most ${limit} steps can be checkpointed in one operation; ${step} would be one more`);
    this.name = 'TooManyStepsError';
  }
}

/**
 * The operation's checkpoint would outgrow what its record holds (the store's `maxCheckpointBytes`: on DynamoDB the
 * 400 KB item shares it with the response). Refused before the step runs when the progress so far leaves no room,
 * else before its outcome is written (the outside call was made: under a deduping key, a retry gets the same result).
 */
export class CheckpointTooLargeError extends StepError {
  constructor(
    step: string,
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(step, `the checkpoint after ${step} would be ${bytes} bytes, over the ${limit}-byte limit of a record`);
    this.name = 'CheckpointTooLargeError';
  }
}

/** A step returned something a checkpoint can't store as JSON and give back the same (a Date, a Map, a BigInt). */
export class StepResultNotJsonError extends StepError {
  constructor(
    step: string,
    /** Where in the result, e.g. `$.shipment.bookedAt`. */
    readonly path: string,
    what: string,
  ) {
    super(step, `step ${step} returned ${what} at ${path}: a step's result must be JSON (it is checkpointed)`);
    this.name = 'StepResultNotJsonError';
  }
}

/**
 * A step found started but not done, whose resolver could not tell whether its outside call happened. Nothing was
 * run: the operation is released (the adapters' usual path for an error) and tried again later, by its client or by
 * recovery. Retryable.
 */
export class StepOutcomeUnknownError extends StepError {
  constructor(
    step: string,
    /** How long until the outcome can be known: when a call still on its way must have landed. Absent: soon. */
    readonly retryAfterMs?: number,
  ) {
    super(step, `step ${step} was started before and its outcome can't be found out yet; try again later`);
    this.name = 'StepOutcomeUnknownError';
  }
}

/**
 * Thrown by a step's function (or its resolver) when its outside system refused it for good (a card declined, an
 * address that can't be shipped to): the operation can never finish. The engine records the refusal in the
 * operation's record, runs the compensations of the steps done in reverse (each checkpointed), then completes the
 * operation with `response` (replayed to every retry) or, without one, abandons it with its progress kept. Every
 * adapter and recovery do this alike; a compensation that fails leaves the operation due, and the next attempt or
 * recovery run goes on from the first step not yet compensated (see docs/recovery.md).
 */
export class StepRefusedError extends StepError {
  readonly response: StoredResponse | undefined;
  constructor(
    step: string,
    message: string,
    options: { readonly response?: StoredResponse; readonly cause?: unknown } = {},
  ) {
    super(step, message, { cause: options.cause });
    this.name = 'StepRefusedError';
    this.response = options.response;
  }
}
