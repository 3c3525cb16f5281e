import { type Clock, LEASE_MARGIN_MS } from './clock.js';
import type { IdempotencyStore } from './contract.js';
import {
  CheckpointTooLargeError,
  StagingClosedError,
  StepOutcomeUnknownError,
  StepRefusedError,
  StepResultNotJsonError,
  StepUsageError,
  TooManyEffectsError,
  TooManyStepsError,
} from './errors.js';
import type { Lease, StoredResponse } from './record.js';
import {
  DEFAULT_MAX_STEPS,
  MAX_STEP_NAME_LENGTH,
  type StepCompensation,
  type StepContext,
  type StepJson,
  type StepObserver,
  type StepOptions,
  type StepOutcome,
  type StepProgress,
  type StepRecord,
  StepState,
} from './steps.js';

/** Absent a store's own limit: what a record holds of progress (the default DynamoDB item leaves room for it). */
export const DEFAULT_MAX_CHECKPOINT_BYTES = 64 * 1024;

const STEP_NAME = /^[A-Za-z0-9_.-]+$/;

/**
 * How soon after its started mark a resolved step's outside call must begin, or it is not made (the mark's write was
 * slow): a later lookup's "not found" is trusted from the mark's time plus this, the step's `landsWithinMs` and the
 * clock skew margin, so a call may never begin later than the mark says.
 */
export const MARK_TO_CALL_MS = 2000;

/** A step done in this run whose compensation recovery may have to run. */
interface Undoable<TEffect> {
  readonly name: string;
  readonly result: unknown;
  readonly compensate: StepCompensation<never, TEffect>;
}

/**
 * The recovery points of one claimed operation: runs each step at most once per generation, as its record says,
 * checkpointing its outcome and its local writes in one fenced write.
 *
 * ```
 *  step(name) ─┬─ done in the record ──────────────────────────────► its recorded result (run not called)
 *              ├─ started, with a resolver ─► resolve ─┬─ found ────► checkpoint done (+ resolver's effects)
 *              │                                       ├─ notFound, its call can no longer land
 *              │                                       │     ─► checkpoint started again ─► run ─► checkpoint done
 *              │                                       └─ unknown, or notFound too soon ─► StepOutcomeUnknownError
 *              ├─ not reached ─► (resolver: checkpoint started) ─► run ─┬─ checkpoint done (+ effects)
 *              │                                                        └─ StepRefusedError ─► checkpoint refused
 *              └─ the operation was refused (a step refused, or compensated) ─► the recorded StepRefusedError
 * ```
 *
 * Once a step is refused the operation only ends: a step done still returns its result (and registers its
 * compensation), every other step throws the recorded refusal, and the adapter compensates and stores the answer.
 *
 * @internal `ClaimedOperation` uses it; not exported by the package
 */
export class StepRunner<TEffect> {
  private progress: StepProgress;
  private readonly reached = new Set<string>();
  private running: string | undefined;
  private readonly undoable: Undoable<TEffect>[] = [];

  constructor(
    private readonly store: IdempotencyStore<TEffect>,
    private readonly lease: Lease,
    private readonly options: {
      readonly clock: Clock;
      readonly isOpen: () => boolean;
      readonly onStep?: StepObserver;
    },
  ) {
    this.progress = lease.progress ?? { revision: 0, steps: [] };
  }

  get current(): StepProgress {
    return this.progress;
  }

  async run<T>(
    name: string,
    run: (step: StepContext<TEffect>) => Promise<T>,
    options: StepOptions<T, TEffect> = {},
  ): Promise<T> {
    this.checkUsage(name);
    this.reached.add(name);
    this.running = name;
    try {
      return await this.runReached(name, run, options);
    } finally {
      this.running = undefined;
    }
  }

  async compensate(): Promise<number> {
    let count = 0;
    for (const done of [...this.undoable].reverse()) {
      const context = this.context(done.name, `${this.stepKey(done.name)}:compensate`);
      try {
        await done.compensate(done.result as never, context.handle);
        await this.write(done.name, StepState.Compensated, this.entry(done.name)?.result, context.close());
      } catch (error) {
        this.observe(done.name, 'compensationFailed');
        throw error;
      }
      this.undoable.splice(this.undoable.indexOf(done), 1);
      this.observe(done.name, 'compensated');
      count += 1;
    }
    return count;
  }

  private async runReached<T>(
    name: string,
    run: (step: StepContext<TEffect>) => Promise<T>,
    options: StepOptions<T, TEffect>,
  ): Promise<T> {
    const entry = this.entry(name);
    if (entry?.state === StepState.Done) {
      this.observe(name, 'replayed');
      return this.done(name, entry.result as T, options);
    }
    // Refused for good earlier: nothing runs again; the attempt goes on to compensate and end.
    if (this.ending) throw this.recordedRefusal();
    if (entry === undefined) this.checkRoom(name);
    let outcome: StepOutcome = 'ran';
    if (entry?.state === StepState.Started && options.resolve) {
      const context = this.context(name);
      const lookup = await this.observed(name, () => options.resolve!(context.handle), context);
      if ('found' in lookup) {
        await this.observed(name, () => this.write(name, StepState.Done, lookup.found, context.close()));
        this.observe(name, 'found');
        return this.done(name, lookup.found, options);
      }
      context.close(); // a resolver that found nothing has nothing to write
      // "Not found" is only final once a call begun at the mark can no longer land: before, it is still on its way.
      const final = entry.at + MARK_TO_CALL_MS + options.landsWithinMs + LEASE_MARGIN_MS;
      const now = this.options.clock.now();
      if ('unknown' in lookup || now < final) {
        this.observe(name, 'unknown');
        throw new StepOutcomeUnknownError(name, 'unknown' in lookup ? undefined : final - now);
      }
      outcome = 'rerun';
    }
    if (options.resolve) await this.markStarted(name, options.landsWithinMs);
    const context = this.context(name);
    const result = await this.observed(
      name,
      async () => {
        const value = await run(context.handle);
        await this.write(name, StepState.Done, value, context.close());
        return value;
      },
      context,
    );
    this.observe(name, outcome);
    return this.done(name, result, options);
  }

  /**
   * Before a resolved step's outside call (and again before it is made a second time): the mark a resumed operation
   * finds, dated now. A mark whose write took too long is not followed by the call: its date would understate when
   * the call began.
   */
  private async markStarted(name: string, landsWithinMs: number): Promise<void> {
    const at = this.options.clock.now();
    await this.observed(name, () => this.write(name, StepState.Started, undefined, []));
    if (this.options.clock.now() - at > MARK_TO_CALL_MS) {
      this.observe(name, 'unknown');
      throw new StepOutcomeUnknownError(name, MARK_TO_CALL_MS + landsWithinMs + LEASE_MARGIN_MS);
    }
  }

  /** Whether the operation was refused for good (a step refused, or already compensated): it can only end. */
  get ending(): boolean {
    return this.progress.steps.some((step) => step.state === StepState.Refused || step.state === StepState.Compensated);
  }

  /** The refusal as the record keeps it, to throw again on every attempt that meets it. */
  recordedRefusal(): StepRefusedError {
    return refusalOf(this.progress) ?? new StepRefusedError('', 'the operation was refused for good earlier');
  }

  /**
   * Records a refusal in the operation's record (once), so that every later attempt compensates and ends instead of
   * running the refused step again. A refusal thrown outside any step is recorded under its `step` when that name is
   * free (or only started); false when it can't be recorded (the name is a step done or invalid).
   */
  async recordRefusal(error: StepRefusedError): Promise<boolean> {
    if (this.ending) return true;
    const entry = this.entry(error.step);
    if (!STEP_NAME.test(error.step) || error.step.length > MAX_STEP_NAME_LENGTH) return false;
    if (entry !== undefined && entry.state !== StepState.Started) return false;
    const response = error.response === undefined ? null : storableResponse(error.response);
    await this.write(error.step, StepState.Refused, response, []);
    return true;
  }

  /** The attempt that recorded the refusal, if any: compensation retries back off from it. */
  get refusedAttempt(): number | undefined {
    return this.progress.steps.find((step) => step.state === StepState.Refused)?.attempt;
  }

  private checkUsage(name: string): void {
    if (!this.options.isOpen()) {
      throw new StepUsageError(name, 'closed', `step ${name} was called after the work returned; it did not run`);
    }
    if (name.length === 0 || name.length > MAX_STEP_NAME_LENGTH || !STEP_NAME.test(name)) {
      throw new StepUsageError(
        name,
        'invalid_name',
        `a step name is 1 to ${MAX_STEP_NAME_LENGTH} characters of A-Z, a-z, 0-9, _, . and -; got ${JSON.stringify(name)}`,
      );
    }
    if (this.running !== undefined) {
      throw new StepUsageError(
        name,
        'concurrent',
        `step ${name} was started while step ${this.running} runs: steps run one after another (await each)`,
      );
    }
    if (this.reached.has(name)) {
      throw new StepUsageError(name, 'duplicate_name', `step ${name} was already run in this operation`);
    }
    if (typeof this.store.checkpoint !== 'function') {
      throw new StepUsageError(name, 'unsupported', `this store has no checkpoints: step ${name} can't be recorded`);
    }
  }

  /** Before a new step runs: is there room in the record for one more? */
  private checkRoom(name: string): void {
    const maxSteps = this.store.maxSteps ?? DEFAULT_MAX_STEPS;
    if (this.progress.steps.length >= maxSteps) throw new TooManyStepsError(name, maxSteps);
    const limit = this.maxBytes();
    const bytes = progressBytes({
      revision: this.progress.revision + 2,
      steps: [...this.progress.steps, this.newEntry(name, StepState.Started, undefined)],
    });
    if (bytes > limit) throw new CheckpointTooLargeError(name, bytes, limit);
  }

  private maxBytes(): number {
    return this.store.maxCheckpointBytes ?? DEFAULT_MAX_CHECKPOINT_BYTES;
  }

  /** Checkpoints the step's new state (its result checked as JSON first) with its effects, fenced by the lease. */
  private async write(name: string, state: StepState, result: unknown, effects: readonly TEffect[]): Promise<void> {
    const json = result === undefined ? undefined : asStepJson(name, result);
    const entry = this.newEntry(name, state, json);
    const steps = this.entry(name)
      ? this.progress.steps.map((step) => (step.name === name ? entry : step))
      : [...this.progress.steps, entry];
    const next: StepProgress = { revision: this.progress.revision + 1, steps };
    const bytes = progressBytes(next);
    if (bytes > this.maxBytes()) throw new CheckpointTooLargeError(name, bytes, this.maxBytes());
    await this.store.checkpoint!(this.lease, next, effects);
    this.progress = next;
  }

  private newEntry(name: string, state: StepState, result: StepJson | undefined): StepRecord {
    return {
      name,
      state,
      ...(result !== undefined ? { result } : {}),
      attempt: this.lease.attempt,
      at: this.options.clock.now(),
    };
  }

  private entry(name: string): StepRecord | undefined {
    return this.progress.steps.find((step) => step.name === name);
  }

  private done<T>(name: string, result: T, options: StepOptions<T, TEffect>): T {
    if (options.compensate) {
      this.undoable.push({ name, result, compensate: options.compensate as StepCompensation<never, TEffect> });
    }
    return result;
  }

  /**
   * Runs `work`, counting a throw as the step's `failed` outcome, or `refused`: a refusal is recorded in the record
   * before it goes on, with the writes the refused step staged (its record of the refusal), so that no later attempt
   * runs the step again.
   */
  private async observed<T>(
    name: string,
    work: () => Promise<T>,
    context?: { close: () => readonly TEffect[] },
  ): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (!(error instanceof StepRefusedError) || this.ending) {
        this.observe(name, 'failed');
        throw error;
      }
      this.observe(name, 'refused');
      // The refusal is the step's, whatever name its thrower gave it.
      const refusal =
        error.step === name ? error : new StepRefusedError(name, error.message, { ...refusalParts(error) });
      const response = refusal.response ? storableResponse(refusal.response) : null;
      await this.write(name, StepState.Refused, response, context?.close() ?? []);
      throw refusal;
    }
  }

  private observe(step: string, outcome: StepOutcome): void {
    this.options.onStep?.({ key: this.lease.key, step, outcome, attempt: this.lease.attempt });
  }

  private stepKey(name: string): string {
    return `${this.lease.downstreamKey}:${name}`;
  }

  /** A step's context, with its own staged effects: closed when its checkpoint is built. */
  private context(
    name: string,
    downstreamKey = this.stepKey(name),
  ): { handle: StepContext<TEffect>; close: () => readonly TEffect[] } {
    const staged: TEffect[] = [];
    let open = true;
    const store = this.store;
    const key = this.lease.key;
    const handle: StepContext<TEffect> = Object.freeze({
      name,
      downstreamKey,
      attempt: this.lease.attempt,
      stage: (...effects: TEffect[]) => {
        if (!open) throw new StagingClosedError(key);
        if (staged.length + effects.length > store.maxEffects) throw new TooManyEffectsError(store.maxEffects);
        for (const [i, effect] of effects.entries()) store.checkEffect?.(effect, staged.length + i);
        staged.push(...effects);
      },
    });
    return {
      handle,
      close: () => {
        open = false;
        return staged;
      },
    };
  }
}

/**
 * The refusal a record's progress holds, as the error every attempt that meets it throws: undefined when no step was
 * refused (or compensated: the operation is then being undone, with no answer to store).
 *
 * @internal the engine's adapters use it; not exported by the package
 */
export function refusalOf(progress: StepProgress | undefined): StepRefusedError | undefined {
  const steps = progress?.steps ?? [];
  const refused = steps.find((step) => step.state === StepState.Refused);
  if (refused === undefined) {
    const undone = steps.find((step) => step.state === StepState.Compensated);
    return undone && new StepRefusedError(undone.name, `the operation was compensated: step ${undone.name} undone`);
  }
  const response = refused.result === null || refused.result === undefined ? undefined : refused.result;
  return new StepRefusedError(refused.name, `step ${refused.name} was refused for good`, {
    ...(response !== undefined ? { response: response as unknown as StoredResponse } : {}),
  });
}

/** A refusal's response and cause, for the same refusal under its step's name. */
function refusalParts(error: StepRefusedError): { response?: StoredResponse; cause?: unknown } {
  return {
    ...(error.response ? { response: error.response } : {}),
    ...(error.cause !== undefined ? { cause: error.cause } : {}),
  };
}

/** A refusal's response as the refused entry keeps it: JSON, its headers as strings. */
function storableResponse(response: StoredResponse): StepJson {
  return {
    statusCode: response.statusCode,
    headers: Object.fromEntries(Object.entries(response.headers).map(([name, value]) => [name, String(value)])),
    body: response.body,
  };
}

/** The progress as the record stores it: its JSON's length in bytes. */
export function progressBytes(progress: StepProgress): number {
  return Buffer.byteLength(JSON.stringify(progress));
}

/**
 * The result as the checkpoint stores it, refused where JSON would not give back the same value: a Date (a string
 * after the round trip), a Map or Set (`{}`), a class instance, a BigInt, a function, a symbol, NaN or Infinity
 * (`null`), an `undefined` in an array (`null`), or a cycle. `undefined` members of an object are dropped, as JSON
 * drops them.
 */
export function asStepJson(step: string, value: unknown, path = '$', seen = new Set<object>()): StepJson {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (!Number.isFinite(value)) throw new StepResultNotJsonError(step, path, String(value));
      return value;
    case 'object': {
      if (value === null) return null;
      if (seen.has(value)) throw new StepResultNotJsonError(step, path, 'a cycle');
      seen.add(value);
      try {
        if (Array.isArray(value)) {
          return value.map((item, i) => {
            if (item === undefined) throw new StepResultNotJsonError(step, `${path}[${i}]`, 'undefined');
            return asStepJson(step, item, `${path}[${i}]`, seen);
          });
        }
        const prototype = Object.getPrototypeOf(value);
        if (prototype !== Object.prototype && prototype !== null) {
          throw new StepResultNotJsonError(step, path, `a ${value.constructor?.name ?? 'non-plain'} object`);
        }
        const out: Record<string, StepJson> = {};
        for (const [member, item] of Object.entries(value)) {
          if (item !== undefined) out[member] = asStepJson(step, item, `${path}.${member}`, seen);
        }
        return out;
      } finally {
        seen.delete(value);
      }
    }
    default:
      throw new StepResultNotJsonError(step, path, `a ${typeof value}`);
  }
}
