import { type Clock, systemClock } from './clock.js';
import type { IdempotencyStore } from './contract.js';
import {
  LeaseLostError,
  StagingClosedError,
  StepOutcomeUnknownError,
  StepRefusedError,
  TooManyEffectsError,
} from './errors.js';
import type { Lease, StoredResponse } from './record.js';
import { StepRunner } from './step-runner.js';
import type { StepContext, StepObserver, StepOptions, StepProgress } from './steps.js';

/**
 * What the work sees of the operation it runs under, whichever adapter runs it: the HTTP middleware
 * (`context.idempotency`), the SQS adapter (the record context) and {@link makeIdempotent} (its second argument).
 */
export interface IdempotencyHandle<TEffect> {
  /**
   * The operation's stored (scoped) key: a reference to hand an outside system along with the effect, so that a
   * witness of the effect (a webhook) can find the operation again without a scan.
   */
  readonly key: string;
  /**
   * The key to forward to outside systems (a payment processor's `Idempotency-Key`). It is the same for every retry
   * and takeover of this operation, so an outside call made by an attempt that then failed is recognised, not
   * repeated, when the next attempt makes it again.
   */
  readonly downstreamKey: string;
  /** 1 for the first owner of this operation; +1 for each attempt that took it over (after a release or a crash). */
  readonly attempt: number;
  /**
   * Adds writes to the commit, in the store's own terms (a DynamoDB transaction item; SQL run in the commit's
   * transaction on PostgreSQL): they are written in one transaction with the key's completion, so they happen exactly
   * once, and not at all if the work fails or this owner's lease was taken over. At most the store's `maxEffects`
   * per operation ({@link TooManyEffectsError}); staging after the work returned throws {@link StagingClosedError};
   * an effect that is not the store's kind throws `EffectKindError` (the types refuse it first: see below).
   *
   * A property, not a method, on purpose: TypeScript compares a method's parameters both ways (bivariantly), and a
   * handle for one store's effects would then pass for a handle of another's. As a property it is checked strictly:
   * a handle that takes anything (`IdempotencyHandle<unknown>`) serves where a narrower one is asked for, never the
   * other way round.
   */
  readonly stage: (...effects: TEffect[]) => void;
  /**
   * A recovery point: runs `run` as the named step of this operation and checkpoints its result (JSON) in the
   * operation's record, with the effects the step stages (`context.stage`), in one transaction fenced by the lease.
   * A retry, a takeover or recovery runs the work from the top again: a step already done returns its recorded result
   * without running `run`. The step's outside system gets `context.downstreamKey` (`${downstreamKey}:${name}`),
   * the same for every attempt of this generation. `options` says how that system behaves, and so what a resumed
   * operation does with a step that may have run ({@link StepOptions}: it dedupes, the default; it accepts
   * at-least-once; or a resolver looks the outcome up). Steps run one after another (`await` each), each name once
   * per operation; the last write, the operation's completion and response, stays the adapter's commit.
   *
   * A property, not a method, for the same reason as {@link stage}: the step context's `stage` follows the store.
   *
   * @throws {StepUsageError} a bad or repeated name, a step while another runs, after the work returned, or a store
   *   without checkpoints: before anything runs.
   * @throws {TooManyStepsError | CheckpointTooLargeError} over the store's limits: before the step runs.
   * @throws {StepResultNotJsonError} the result can't be checkpointed as JSON; nothing was written.
   * @throws {StepOutcomeUnknownError} a started step's resolver could not say: retry the operation later.
   * @throws {LeaseLostError} the lease was taken over; this step's checkpoint was not written.
   *
   * @example
   * const charge = await idempotency.step('charge', (step) =>
   *   processor.charge(order, { idempotencyKey: step.downstreamKey }),
   * );
   * const shipment = await idempotency.step('ship', (step) => warehouse.book({ reference: step.downstreamKey }), {
   *   resolve: async (step) => {
   *     const [found] = await warehouse.find({ reference: step.downstreamKey });
   *     return found ? { found } : { notFound: true };
   *   },
   * });
   */
  readonly step: <T>(
    name: string,
    run: (step: StepContext<TEffect>) => Promise<T>,
    options?: StepOptions<NoInfer<T>, TEffect>,
  ) => Promise<T>;
}

/** What a {@link ClaimedOperation} is built with, beyond its store and lease. */
export interface OperationOptions {
  /** Told each step's outcome (count them: {@link StepMetric}). */
  readonly onStep?: StepObserver;
  /** The clock a checkpoint's entries are dated with. Default: the store's, else the system's. */
  readonly clock?: Clock;
}

/**
 * How an attempt ended, as its adapter saw it: an outcome worth storing (the work's result, an HTTP response that is
 * deterministic), or a transient end (the work threw, or answered something a retry may change) with its error.
 */
export type AttemptEnd =
  | { readonly kind: 'outcome'; readonly response: StoredResponse }
  | { readonly kind: 'transient'; readonly error?: unknown };

/**
 * What {@link ClaimedOperation.settle} did: committed; fenced (the lease was taken over, nothing written); released
 * for a retry (`released` false when the store no longer held it for us, or could not be reached), with the error
 * that ended the attempt or failed the commit, if any; or, for an operation refused for good, ended or still ending.
 *
 * - `refused`: a step was refused for good (`StepRefusedError`); the steps done were compensated, and the operation
 *   completed with the refusal's `response` (every retry replays it) or, without one, abandoned with its progress kept.
 * - `compensating`: refused, but a compensation failed: released for a retry after `retryAfterMs` (recovery backs off
 *   the same way), `failures` counting the attempts that tried since the refusal.
 */
export type Settlement =
  | { readonly kind: 'committed' }
  | { readonly kind: 'fenced'; readonly error: LeaseLostError }
  | { readonly kind: 'released'; readonly released: boolean; readonly error?: unknown }
  | {
      readonly kind: 'refused';
      readonly refusal: StepRefusedError;
      readonly response: StoredResponse | undefined;
      /** Compensations this attempt ran. */
      readonly compensated: number;
      /** Abandoned with steps done that declared no compensation: progress nobody will undo. Alarm on it. */
      readonly leftDone: boolean;
    }
  | {
      readonly kind: 'compensating';
      readonly released: boolean;
      readonly error: unknown;
      readonly failures: number;
      readonly retryAfterMs: number;
    };

/** The longest a failed compensation waits before it is tried again: backoff doubles from a lease up to this. */
export const MAX_COMPENSATION_BACKOFF_MS = 60 * 60 * 1000;

/**
 * One claimed operation, from its claim to the end of its lease: the handle its work sees, the effects staged
 * through it, and the two ways the lease ends. Every adapter goes through it, so staging is capped and closed the
 * same way everywhere:
 *
 * ```
 *  claim ─► new ClaimedOperation(store, lease) ─► work(handle) ─┬─ commit(response): staged effects + completion,
 *                                                               │  one fenced transaction
 *                                                               └─ release(): the key back, same downstream key
 *           staging closes when either begins: a late stage() throws instead of being lost
 * ```
 */
export class ClaimedOperation<TEffect> {
  /** The handle to give the work. It holds no way to commit or release: that stays with the adapter. */
  readonly handle: IdempotencyHandle<TEffect>;
  private readonly staged: TEffect[] = [];
  private open = true;
  /** The operation's recovery points: what `handle.step` runs, checkpoints and, for recovery, compensates. */
  private readonly steps: StepRunner<TEffect>;

  constructor(
    private readonly store: IdempotencyStore<TEffect>,
    readonly lease: Lease,
    options: OperationOptions = {},
  ) {
    this.steps = new StepRunner(store, lease, {
      clock: options.clock ?? store.clock ?? systemClock,
      isOpen: () => this.open,
      ...(options.onStep ? { onStep: options.onStep } : {}),
    });
    this.handle = Object.freeze({
      key: lease.key,
      downstreamKey: lease.downstreamKey,
      attempt: lease.attempt,
      stage: (...effects: TEffect[]) => this.stage(effects),
      step: <T>(
        name: string,
        run: (step: StepContext<TEffect>) => Promise<T>,
        stepOptions?: StepOptions<NoInfer<T>, TEffect>,
      ) => this.steps.run(name, run, stepOptions),
    });
  }

  /**
   * Undoes the steps this run passed through that declared a `compensate`, in reverse order, checkpointing each as
   * compensated (a crash half-way compensates only the rest next time). Recovery calls it for an operation that can
   * never finish (a step threw `StepRefusedError`); an adapter of your own may too. Answers how many ran.
   *
   * @throws the first compensation's error; the steps after it in the undo order stay done, and it may be run again.
   */
  async compensate(): Promise<number> {
    return this.steps.compensate();
  }

  /** How far the operation has got: its progress when the lease was taken, and every checkpoint since. */
  get progress(): StepProgress {
    return this.steps.current;
  }

  /**
   * Ends staging (the work has returned or failed) and hands back what was staged. Idempotent: commit and release
   * call it too, so an adapter that closes first (to build its response) loses nothing.
   */
  close(): readonly TEffect[] {
    this.open = false;
    return this.staged;
  }

  /**
   * Commits the staged effects with the key's completion and this response ({@link IdempotencyStore.commit}).
   *
   * @throws {LeaseLostError} the lease was taken over; nothing was written.
   */
  async commit(response: StoredResponse): Promise<void> {
    const effects = this.close();
    await this.store.commit(this.leaseNow(), response, effects);
  }

  /** The lease as the checkpoints left it: the store sizes a response against the progress in the record. */
  private leaseNow(): Lease {
    const progress = this.steps.current;
    return progress.revision > 0 ? { ...this.lease, progress } : this.lease;
  }

  /**
   * Gives the key back for a retry, writing none of the staged effects ({@link IdempotencyStore.release}). False
   * when this owner no longer held it.
   */
  async release(): Promise<boolean> {
    this.close();
    return this.store.release(this.lease);
  }

  /**
   * Gives the operation up, writing none of the staged effects ({@link IdempotencyStore.abandon}): its progress is
   * kept. False when this owner no longer held it.
   */
  async abandon(): Promise<boolean> {
    this.close();
    return this.store.abandon(this.lease);
  }

  /**
   * Ends the operation as the attempt ended, by the one policy every adapter shares: an outcome is committed with the
   * staged effects; a transient end releases the key (keeping its downstream key), as does a commit that failed for
   * any reason but a lost lease. A fenced commit (the lease was taken over) releases nothing: the key is the new
   * owner's. A release the store could not make (unreachable) is reported as not released: the lease then runs out
   * and the next attempt takes the key over.
   *
   * An operation refused for good (the work threw `StepRefusedError`, or met the refusal an earlier attempt
   * recorded) is ended instead, whatever the attempt answered: the refusal recorded, the steps done compensated in
   * reverse, then the refusal's response committed, or the operation abandoned without one ({@link Settlement}).
   */
  async settle(end: AttemptEnd): Promise<Settlement> {
    if (this.steps.ending || (end.kind === 'transient' && end.error instanceof StepRefusedError)) {
      const refused = await this.endRefused(end);
      if (refused !== undefined) return refused;
    }
    if (end.kind === 'outcome') {
      try {
        await this.commit(end.response);
        return { kind: 'committed' };
      } catch (error) {
        if (error instanceof LeaseLostError) return { kind: 'fenced', error };
        return { kind: 'released', released: await this.releaseQuietly(), error };
      }
    }
    // A step whose outcome can't be known yet says when it can: no retry (or recovery run) comes back sooner.
    const recoverAfterMs = end.error instanceof StepOutcomeUnknownError ? end.error.retryAfterMs : undefined;
    return { kind: 'released', released: await this.releaseQuietly(recoverAfterMs), error: end.error };
  }

  /**
   * The end of an operation refused for good: record the refusal, compensate, store its answer. Undefined when the
   * refusal can't be recorded (thrown outside a step, under the name of a step done): it ends as any error does.
   */
  private async endRefused(end: AttemptEnd): Promise<Settlement | undefined> {
    this.close(); // what the work staged outside steps belongs to an attempt that did not finish: none of it commits
    const thrown = end.kind === 'transient' && end.error instanceof StepRefusedError ? end.error : undefined;
    let refusal: StepRefusedError;
    try {
      if (!this.steps.ending && (thrown === undefined || !(await this.steps.recordRefusal(thrown)))) return undefined;
      refusal = this.steps.recordedRefusal();
    } catch (error) {
      if (error instanceof LeaseLostError) return { kind: 'fenced', error };
      return { kind: 'released', released: await this.releaseQuietly(), error };
    }
    let compensated: number;
    try {
      compensated = await this.steps.compensate();
    } catch (error) {
      if (error instanceof LeaseLostError) return { kind: 'fenced', error };
      const failures = this.lease.attempt - (this.steps.refusedAttempt ?? this.lease.attempt) + 1;
      const retryAfterMs = Math.min(this.store.leaseMs * 2 ** Math.min(failures - 1, 30), MAX_COMPENSATION_BACKOFF_MS);
      const released = await this.releaseQuietly(retryAfterMs);
      return { kind: 'compensating', released, error, failures, retryAfterMs };
    }
    const response = refusal.response ?? (end.kind === 'outcome' ? end.response : undefined);
    try {
      if (response !== undefined) await this.store.commit(this.leaseNow(), response, []);
      else if (!(await this.store.abandon(this.lease))) {
        return { kind: 'fenced', error: new LeaseLostError(this.lease.key, undefined) };
      }
    } catch (error) {
      if (error instanceof LeaseLostError) return { kind: 'fenced', error };
      return { kind: 'released', released: await this.releaseQuietly(), error };
    }
    const leftDone = response === undefined && this.progress.steps.some((step) => step.state === 'done');
    return { kind: 'refused', refusal, response, compensated, leftDone };
  }

  private async releaseQuietly(recoverAfterMs?: number): Promise<boolean> {
    try {
      this.close();
      return await this.store.release(this.lease, recoverAfterMs === undefined ? undefined : { recoverAfterMs });
    } catch {
      return false;
    }
  }

  private stage(effects: readonly TEffect[]): void {
    // A write staged after the commit was built would be silently lost: refuse it loudly instead.
    if (!this.open) throw new StagingClosedError(this.lease.key);
    const limit = this.store.maxEffects;
    if (this.staged.length + effects.length > limit) throw new TooManyEffectsError(limit);
    // The wrong store's effect is refused here, from the staging line, rather than at the commit (which checks too).
    for (const [i, effect] of effects.entries()) this.store.checkEffect?.(effect, this.staged.length + i);
    this.staged.push(...effects);
  }
}
