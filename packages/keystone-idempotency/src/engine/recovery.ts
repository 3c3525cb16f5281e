import type { DueOperation, IdempotencyStore } from './contract.js';
import { EffectConditionFailedError, LeaseLostError, StepOutcomeUnknownError } from './errors.js';
import { type AttemptEnd, ClaimedOperation, type IdempotencyHandle } from './operation.js';
import type { Lease, StoredResponse } from './record.js';
import type { StepEvent, StepObserver, StepOutcome } from './steps.js';

/**
 * What recovery decided about one unfinished operation, having asked the outside system under its downstream key.
 *
 * - `complete`: the effect happened; commit its local record and the response a retry will replay.
 * - `abandon`: no effect happened and none can happen any more; give the operation up (a late retry of the same
 *   request still takes it over under the same downstream key).
 * - `retry`: the outside system could not say (down, or the request still running there); try again next run.
 */
export type RecoveryVerdict<TEffect> =
  | { readonly kind: 'complete'; readonly response: StoredResponse; readonly effects?: readonly TEffect[] }
  | { readonly kind: 'abandon' }
  | { readonly kind: 'retry'; readonly reason: string }
  /**
   * A multi-step operation: run its work again from its last recovery point. Steps done are not run again (their
   * recorded results come back), a step found started goes through its resolver, and the rest run; the response the
   * work returns is committed with what it staged outside steps. The lease's `progress` holds what the steps recorded
   * (a first step that returns the operation's input lets the resolver rebuild the work from the record alone).
   *
   * A step that throws `StepRefusedError` means the operation can never finish: the compensations of the steps done
   * run in reverse, then the operation is completed with the error's `response` when it carries one, or else
   * abandoned with its progress kept (`logger.error`, and `abandonedWithProgress` in the report: alarm on it). Any
   * other error (a `StepOutcomeUnknownError`, an outside system down) releases it: due again a lease later.
   */
  | {
      readonly kind: 'continue';
      readonly work: (handle: IdempotencyHandle<TEffect>, lease: Lease) => Promise<StoredResponse>;
    };

/** Asks the outside system what became of one operation. Must not repeat the effect: it only looks. */
export type RecoveryResolver<TEffect> = (lease: Lease) => Promise<RecoveryVerdict<TEffect>>;

/** What one recovery run did. */
export interface RecoveryReport {
  /** Operations the index offered this run, over all its pages (each counted once). */
  due: number;
  completed: number;
  abandoned: number;
  retried: number;
  /** Finished, taken, or given back by someone else between the index and our takeover: not ours to act on. */
  skipped: number;
  /** The resolver or a write failed; the operation stays due (released, or its lease runs out). */
  failed: number;
  /**
   * Multi-step operations that could never finish (a step refused for good): their done steps' compensations ran,
   * and they were completed with the refusal's response or abandoned. Also counted in `completed` or `abandoned`.
   */
  compensated: number;
  /**
   * Multi-step operations abandoned with steps done and not compensated (none declared one): progress that nobody
   * will finish or undo. Also counted in `abandoned`. Alarm on it: it needs a person.
   */
  abandonedWithProgress: number;
  /**
   * Operations refused for good whose compensation failed this run: left due, backed off (a lease, doubling, up to an
   * hour). Also counted in `retried`.
   */
  compensationFailed: number;
  /**
   * Of those, the ones whose compensation has failed {@link COMPENSATION_ALARM_AFTER} times or more since the refusal:
   * money or goods a customer should get back and has not. Alarm on it: it needs a person.
   */
  compensationStuck: number;
  /** Each step outcome the runs' `continue` verdicts met, counted (the metric names: `StepMetric`). */
  steps: Partial<Record<StepOutcome, number>>;
  /** Offered, but the run was told to stop before taking them (a Lambda nearing its timeout): due for the next run. */
  left: number;
  /**
   * The unfinished operation first due longest ago (by `firstDueAt`) among those this run did not finish: retried
   * or failed (released, so due again a lease later), left, or still due when the run ended. How long ago it was
   * first due says how far behind recovery is: a healthy run leaves none. Measured from the first time it was due,
   * not from `recoverAt`, which every retry moves: an operation retried run after run keeps growing older here.
   *
   * `firstDueAt` is the record's `createdAt` plus the store's lease (never later than `recoverAt`), from what the run
   * reads anyway: the store's recovery set where it says (PostgreSQL), the lease of each operation the run took over,
   * and one `get` of the operation still due at the end. Where nothing better is known, it is `recoverAt` (on DynamoDB,
   * operations a run short of time left untaken, or one whose takeover failed), which every retry moves.
   */
  oldestDue?: DueOperation & { readonly firstDueAt: number };
}

/** Failed attempts at a refused operation's compensation after which recovery reports it stuck (`compensationStuck`). */
export const COMPENSATION_ALARM_AFTER = 5;

export interface RecoverDueOptions {
  /** Operations read from the index at a time. Default 100. A run reads page after page until nothing new is due. */
  readonly limit?: number;
  /** Operations worked on at once. Default 4. */
  readonly concurrency?: number;
  /** Checked before each page and each operation: stop taking new ones (a Lambda nearing its timeout). */
  readonly shouldStop?: () => boolean;
  /** Told each step's outcome in `continue` verdicts, as it happens (count them: `StepMetric`). */
  readonly onStep?: StepObserver;
  readonly logger?: {
    warn(message: string, details: Record<string, unknown>): void;
    error(message: string, details: Record<string, unknown>): void;
  };
}

/**
 * One run of recovery: for each operation due in the recovery index, take it over (fenced, like any owner), ask
 * the outside system through `resolve`, and complete, abandon or release it. Page after page, until nothing new is
 * due or `shouldStop` says the run's time is up: a backlog larger than a page is drained in one run, and one larger
 * than a run is left due for the next (an unfinished recoverable operation never expires, so waiting costs time,
 * never money).
 *
 * ```
 *  findDue ──► resume (fenced takeover) ──► resolve(lease) ──┬─ complete: commit response + effects (fenced)
 *   ▲             │ live owner, done,                          ├─ abandon:  ABANDONED, out of the index
 *   │             └ or gone: skipped                           └─ retry:    release; due again a lease later
 *   └── next page: every operation taken over is no longer due (its recoverAt moved to its new lease's end)
 * ```
 *
 * Every step is conditioned on the lease it took, so a client that comes back meanwhile, a second recovery run or
 * a webhook doing the same work can never make it write twice: whoever loses the takeover skips, and an owner that
 * lost its lease writes nothing.
 */
export async function recoverDue<TEffect>(
  store: IdempotencyStore<TEffect>,
  resolve: RecoveryResolver<TEffect>,
  options: RecoverDueOptions = {},
): Promise<RecoveryReport> {
  const pageSize = Math.max(1, options.limit ?? 100);
  const stopped = () => options.shouldStop?.() ?? false;
  const report: RecoveryReport = {
    due: 0,
    completed: 0,
    abandoned: 0,
    retried: 0,
    skipped: 0,
    failed: 0,
    left: 0,
    compensated: 0,
    abandonedWithProgress: 0,
    compensationFailed: 0,
    compensationStuck: 0,
    steps: {},
  };
  const logger = options.logger ?? console;
  const steps: StepsContext = {
    onStep: (event: StepEvent) => {
      report.steps[event.outcome] = (report.steps[event.outcome] ?? 0) + 1;
      options.onStep?.(event);
    },
    compensated: () => {
      report.compensated += 1;
    },
    abandonedWithProgress: (key, progress) => {
      report.abandonedWithProgress += 1;
      logger.error('a multi-step operation could not finish and was abandoned with its progress kept', {
        key,
        steps: progress,
      });
    },
    compensationFailed: (key, failures, retryAfterMs, error) => {
      report.compensationFailed += 1;
      const details = { key, failures, retryAfterMs, error: String(error) };
      if (failures < COMPENSATION_ALARM_AFTER) {
        logger.warn('a compensation failed; the operation is tried again later', details);
        return;
      }
      report.compensationStuck += 1;
      logger.error('a compensation keeps failing: the operation can not be undone without help', details);
    },
  };
  // Operations this run has been offered. One it skipped or failed may still be due (or an index that has not
  // caught up may still list one it finished): it is read past, never worked on twice in one run.
  const seen = new Set<string>();
  // When each operation this run took over was first due, from its lease: a keys-only index can't say.
  const firstDue = new Map<string, number>();
  let ask = pageSize;
  while (!stopped()) {
    const offered = await store.findDue({ limit: ask });
    const unseen = offered.filter((due) => !seen.has(due.key));
    if (unseen.length === 0) {
      if (offered.length < ask) break; // everything due has been offered this run
      ask *= 2; // a whole page of operations already seen: read further past them
      continue;
    }
    ask = pageSize + (offered.length - unseen.length);
    const page = unseen.slice(0, pageSize);
    for (const due of page) seen.add(due.key);
    report.due += page.length;
    report.left += await work(page);
  }
  const [stillDue] = await store.findDue({ limit: 1 });
  if (stillDue) unfinished(stillDue, firstDue.get(stillDue.key) ?? stillDue.firstDueAt ?? (await fromRecord(stillDue)));
  return report;

  /** Keeps the operation first due longest ago (ties: the earlier `recoverAt`, then the key, so runs agree). */
  function unfinished(due: DueOperation, firstDueAt: number): void {
    const candidate = { key: due.key, recoverAt: due.recoverAt, firstDueAt };
    const oldest = report.oldestDue;
    if (oldest === undefined || compareAge(candidate, oldest) < 0) report.oldestDue = candidate;
  }

  /** When an operation the index offered without it was first due: from its record (one strongly consistent read). */
  async function fromRecord(due: DueOperation): Promise<number> {
    try {
      const record = await store.get(due.key);
      return record === undefined ? due.recoverAt : firstDueAfter(record.createdAt, due.recoverAt, store.leaseMs);
    } catch (error) {
      // The run's work is done; a failed read for its report must not fail it. Its age then counts from `recoverAt`.
      logger.warn('could not read when the oldest due operation was first due', { key: due.key, error: String(error) });
      return due.recoverAt;
    }
  }

  /** Works through one page with `concurrency` workers; answers how many were left when the run was stopped. */
  async function work(page: DueOperation[]): Promise<number> {
    const queue = [...page];
    async function worker(): Promise<void> {
      for (;;) {
        if (stopped()) return;
        const next = queue.shift();
        if (next === undefined) return;
        const tookOver = (lease: Lease) =>
          firstDue.set(next.key, firstDueAfter(lease.createdAt, next.recoverAt, store.leaseMs));
        const outcome = await recoverOne(store, next.key, resolve, tookOver, steps).catch((error: unknown) => {
          logger.error('recovery failed; the operation stays due', { key: next.key, error: String(error) });
          return 'failed' as const;
        });
        report[outcome] += 1;
        if (outcome === 'retried' || outcome === 'failed') unfinished(next, known(next));
      }
    }
    await Promise.all(Array.from({ length: Math.max(1, options.concurrency ?? 4) }, worker));
    for (const left of queue) unfinished(left, known(left));
    return queue.length;
  }

  /** When an operation was first due, as far as this run knows without another read. */
  function known(due: DueOperation): number {
    return firstDue.get(due.key) ?? due.firstDueAt ?? due.recoverAt;
  }
}

/**
 * When an operation created at `createdAt` was first due: the store's lease after its first claim, never later than
 * it is due now. (A first claim that held a longer lease than the store's, an adapter's covering a function whose
 * timeout exceeds the lease, was first due that much later: its age reads older by the difference, never younger.)
 */
function firstDueAfter(createdAt: number, recoverAt: number, leaseMs: number): number {
  return Math.min(recoverAt, createdAt + leaseMs);
}

function compareAge(a: Required<DueOperation>, b: Required<DueOperation>): number {
  return a.firstDueAt - b.firstDueAt || a.recoverAt - b.recoverAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}

type OneOutcome = 'completed' | 'abandoned' | 'retried' | 'skipped' | 'failed';

async function recoverOne<TEffect>(
  store: IdempotencyStore<TEffect>,
  key: string,
  resolve: RecoveryResolver<TEffect>,
  tookOver: (lease: Lease) => void,
  steps: StepsContext,
): Promise<OneOutcome> {
  const resumed = await store.resume(key);
  if (resumed.kind !== 'acquired') return 'skipped';
  const { lease } = resumed;
  tookOver(lease);
  let verdict: RecoveryVerdict<TEffect>;
  try {
    verdict = await resolve(lease);
  } catch (error) {
    await store.release(lease).catch(() => undefined); // due again later; if even this fails, the lease runs out
    throw error;
  }
  switch (verdict.kind) {
    case 'complete':
      try {
        await store.commit(lease, verdict.response, verdict.effects ?? []);
        return 'completed';
      } catch (error) {
        if (error instanceof LeaseLostError) return 'skipped'; // someone took it over meanwhile: theirs now
        await store.release(lease).catch(() => undefined);
        if (error instanceof EffectConditionFailedError) return 'retried';
        throw error;
      }
    case 'abandon':
      return (await store.abandon(lease)) ? 'abandoned' : 'skipped';
    case 'retry':
      await store.release(lease);
      return 'retried';
    case 'continue':
      return continueSteps(store, lease, verdict.work, steps);
  }
}

/** What a run's `continue` verdicts tell the run's report. */
interface StepsContext {
  readonly onStep: StepObserver;
  readonly compensated: () => void;
  readonly abandonedWithProgress: (key: string, steps: readonly { name: string; state: string }[]) => void;
  readonly compensationFailed: (key: string, failures: number, retryAfterMs: number, error: unknown) => void;
}

/**
 * Drives a multi-step operation forward from its last recovery point: its work again under recovery's lease (steps
 * done come back from the record), then its commit. An operation refused for good (a step refused now, or earlier)
 * ends through the engine's one policy ({@link ClaimedOperation.settle}): compensated, then completed with the
 * refusal's response or abandoned with its progress kept; a compensation that fails leaves it due, backed off.
 */
async function continueSteps<TEffect>(
  store: IdempotencyStore<TEffect>,
  lease: Lease,
  work: (handle: IdempotencyHandle<TEffect>, lease: Lease) => Promise<StoredResponse>,
  steps: StepsContext,
): Promise<OneOutcome> {
  const operation = new ClaimedOperation(store, lease, { onStep: steps.onStep });
  let end: AttemptEnd;
  try {
    end = { kind: 'outcome', response: await work(operation.handle, lease) };
  } catch (error) {
    if (error instanceof LeaseLostError) return 'skipped'; // a checkpoint was fenced: someone else's now
    end = { kind: 'transient', error };
  }
  const settled = await operation.settle(end);
  switch (settled.kind) {
    case 'committed':
      return 'completed';
    case 'fenced':
      return 'skipped';
    case 'refused':
      if (settled.compensated > 0) steps.compensated();
      if (settled.response !== undefined) return 'completed';
      if (settled.leftDone) steps.abandonedWithProgress(lease.key, operation.progress.steps);
      return 'abandoned';
    case 'compensating':
      // Stays due, backed off: the next run compensates what is left (each compensated step is checkpointed).
      steps.compensationFailed(lease.key, settled.failures, settled.retryAfterMs, settled.error);
      return 'retried';
    case 'released': {
      const error = end.kind === 'transient' ? end.error : settled.error;
      if (error instanceof StepOutcomeUnknownError || error instanceof EffectConditionFailedError) return 'retried';
      throw error;
    }
  }
}
