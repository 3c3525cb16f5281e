/**
 * Recovery points: named steps inside one idempotent operation, each checkpointed in the operation's record, fenced
 * by the lease. The types every adapter's handle shares (`IdempotencyHandle.step`), the progress a record stores, and
 * the outcome names metrics are counted under.
 *
 * ```
 *  claim ─► step('reserve') ─► checkpoint ─► step('charge') ─► checkpoint ─► ... ─► commit (response, last effects)
 *                 │ local writes commit          │ the processor sees `${downstreamKey}:charge`
 *                 └ with this checkpoint         └ on every attempt, takeover and recovery of this generation
 *  a retry, a takeover or recovery runs the work from the top: a step already done returns its recorded result
 *  without running; a step found started (one with a resolver) is looked up, not run blindly again
 * ```
 */

/** A step result as a checkpoint stores it: JSON (a Date, a Map, a class instance or a BigInt is refused). */
export type StepJson = null | boolean | number | string | readonly StepJson[] | { readonly [key: string]: StepJson };

/** Where one step stands in its operation's record. `as const` object rather than an enum: the values are stored. */
export const StepState = {
  /**
   * Its outside call may have been made, and its outcome is not recorded: written before the call, only for a step
   * with a resolver (an outside system that does not dedupe), so that a resumed operation looks it up first.
   */
  Started: 'started',
  /** Its outcome is recorded (with its local writes, in one transaction): it never runs again. */
  Done: 'done',
  /** Its compensation ran (it was undone) for an operation that can never finish. */
  Compensated: 'compensated',
  /**
   * Its outside system refused it for good (it threw `StepRefusedError`): the operation can never finish. Its
   * `result` is the refusal's response (null without one); what the step staged before it threw (its own record of
   * the refusal) commits with this entry. Once a step is refused, no step runs again in this generation: every attempt
   * goes on compensating the steps done, then stores the response.
   */
  Refused: 'refused',
} as const;
export type StepState = (typeof StepState)[keyof typeof StepState];

/** One step's entry in its operation's record. */
export interface StepRecord {
  readonly name: string;
  readonly state: StepState;
  /**
   * The step's result (done, compensated), or the refusal's response (refused), as JSON; absent for a step that
   * returned `undefined`, and while started.
   */
  readonly result?: StepJson;
  /** The operation's attempt that wrote this entry. */
  readonly attempt: number;
  /**
   * When this entry was written (epoch ms, the engine's clock). For a started step, when its outside call was about
   * to begin: a lookup's "not found" is only trusted once the step's `landsWithinMs` has passed since.
   */
  readonly at: number;
}

/**
 * How far an operation got, as its record stores it: the steps in the order they were first reached, and the
 * revision, one more with each checkpoint. A checkpoint is conditioned on the revision it follows, so one sent again
 * after its reply was lost never writes its effects twice, and is recognised by the revision it wrote.
 */
export interface StepProgress {
  readonly revision: number;
  readonly steps: readonly StepRecord[];
}

/** What a step's function (and its resolver and compensation) sees. */
export interface StepContext<TEffect> {
  /** The step's name, as given to `step()`. */
  readonly name: string;
  /**
   * The key to forward to this step's outside system: `${operation's downstreamKey}:${name}` (at most 101
   * characters: the operation's is 36, a step name at most 64). The same for every attempt, takeover and recovery of
   * this generation of the operation, and new when the key expires and is claimed afresh. A compensation sees its
   * own, `${step's key}:compensate`.
   */
  readonly downstreamKey: string;
  /** The operation's attempt running the step: 1 for the first owner, +1 for each takeover. */
  readonly attempt: number;
  /**
   * Adds writes, in the store's own terms, to this step's checkpoint: they commit in one transaction with the
   * record of the step's outcome, or not at all (a property, for the same reason as `IdempotencyHandle.stage`).
   * At most the store's `maxEffects` per step.
   */
  readonly stage: (...effects: TEffect[]) => void;
}

/**
 * What a resolver found in the outside system for a step found started but not done. `notFound` is taken as final
 * only once the step's `landsWithinMs` has passed since its started mark; before that, a call still on its way may
 * land, and it counts as `unknown`.
 */
export type StepLookup<T> =
  | { readonly found: T }
  | { readonly notFound: true }
  /** The outside system can't say now (down, or the request still running there): try the operation again later. */
  | { readonly unknown: true };

/** A declared undo of a done step, run by recovery, in reverse order, for an operation that can never finish. */
export type StepCompensation<T, TEffect> = (result: T, context: StepContext<TEffect>) => Promise<void>;

/**
 * How a step's outside system behaves, which decides what a resumed operation does with a step that may have run:
 *
 * - `{ outside: 'dedupes' }` (the default): it dedupes by the key it is given (a payment processor's
 *   `Idempotency-Key`). A step not recorded done runs again under the same `downstreamKey`, and the outside system
 *   answers the first call's outcome. No write before the call.
 * - `{ outside: 'at-least-once' }`: it does not dedupe, and running the call twice is acceptable (a notification
 *   where a duplicate is harmless). A step not recorded done runs again. No write before the call.
 * - `{ resolve }`: it does not dedupe, and twice is not acceptable (a shipment booked with an API that takes no
 *   idempotency key). A "started" mark is checkpointed before the call; a resumed operation that finds the step
 *   started asks `resolve` (look the outcome up by a reference, such as the step's `downstreamKey` sent as the
 *   order reference): `found` records it and goes on without running the step, `notFound` runs it, `unknown`
 *   throws {@link StepOutcomeUnknownError} so the operation is retried later (released; recovery tries again).
 *   One more write per step. `landsWithinMs` (required) says how long after it began a call can still land in the
 *   outside system: its client's timeout plus the system's own processing window. Until then, "not found" is
 *   unknown, never a licence to call again.
 *
 * `compensate`, on any kind: how this step is undone when the operation can never finish (a later step threw
 * `StepRefusedError`): in reverse order, by whichever attempt or recovery run meets the refusal, until every one has
 * run (see docs/recovery.md).
 */
export type StepOptions<T, TEffect = unknown> =
  | {
      readonly outside?: 'dedupes' | 'at-least-once';
      readonly resolve?: never;
      readonly compensate?: StepCompensation<T, TEffect>;
    }
  | {
      readonly resolve: (context: StepContext<TEffect>) => Promise<StepLookup<T>>;
      /** How long after it began the step's outside call can still land (client timeout + processing window), ms. */
      readonly landsWithinMs: number;
      readonly outside?: never;
      readonly compensate?: StepCompensation<T, TEffect>;
    };

/**
 * What happened to one step, as counted: the metric names are {@link StepMetric}'s.
 *
 * - `ran`: it ran and its outcome was checkpointed.
 * - `replayed`: it was done already; its recorded result was returned without running it.
 * - `found`: it was found started, and its resolver found its outcome: recorded without running it.
 * - `rerun`: it was found started, its resolver found nothing, and it ran.
 * - `unknown`: it was found started, and its resolver could not say: the operation is retried later.
 * - `failed`: its function (or its checkpoint) threw.
 * - `refused`: its function threw `StepRefusedError`: the operation can never finish.
 * - `compensated`: recovery ran its compensation.
 * - `compensationFailed`: its compensation threw: the operation stays due, its progress kept.
 */
export type StepOutcome =
  | 'ran'
  | 'replayed'
  | 'found'
  | 'rerun'
  | 'unknown'
  | 'failed'
  | 'refused'
  | 'compensated'
  | 'compensationFailed';

/** One step's outcome, told to an observer (`onStep`) as it happens. */
export interface StepEvent {
  /** The operation's stored key. */
  readonly key: string;
  readonly step: string;
  readonly outcome: StepOutcome;
  readonly attempt: number;
}

/** Told each step's outcome: count it (Powertools' `Metrics`: `addMetric(StepMetric[event.outcome], 'Count', 1)`). */
export type StepObserver = (event: StepEvent) => void;

/** The metric name (`Count`) each step outcome is counted under, by the HTTP middleware and recovery alike. */
export const StepMetric = {
  ran: 'IdempotencyStepRan',
  replayed: 'IdempotencyStepReplayed',
  found: 'IdempotencyStepFound',
  rerun: 'IdempotencyStepRerun',
  unknown: 'IdempotencyStepUnknown',
  failed: 'IdempotencyStepFailed',
  refused: 'IdempotencyStepRefused',
  compensated: 'IdempotencyStepCompensated',
  compensationFailed: 'IdempotencyStepCompensationFailed',
} as const satisfies Record<StepOutcome, string>;

/** Steps one operation may have, unless its store says fewer. */
export const DEFAULT_MAX_STEPS = 32;
/** The longest step name: with the operation's 36-character downstream key, a step key fits in 101 characters. */
export const MAX_STEP_NAME_LENGTH = 64;
