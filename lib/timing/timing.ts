/**
 * The timing rules idempotency depends on, checked the same way for a deployed environment (at synth time) and for
 * the local stack (at start): one pure function, no AWS and no CDK. Durations in milliseconds.
 *
 * ```
 * request ──► API Gateway waits ≤ integration ──► 504; the client retries with the same key
 *             function runs      ≤ function timeout ──► finishes and commits (or dies)
 *             claim is owned     ≤ lease ──► only now may a retry, or recovery, take the key over
 *             recovery is due    a lease after the last attempt; the completer drains what is due, a run's worth
 *                                a cycle ({@link recoveryThroughput})
 *             record lives       unfinished and recoverable: until recovery or its client finishes it
 *                                finished (or not recoverable): ≤ ttl ──► only now is the key forgotten
 * ```
 */

import { LEASE_MARGIN_MS } from 'keystone-idempotency/engine';

/**
 * Settlement's short waits for a payment whose request is still running: the event comes back in 1 s, then 2 s;
 * from the next receive on it waits out what is left of the owner's lease (lib/settlement/settle.ts reads this).
 */
export const SETTLEMENT_SHORT_RETRIES = 2;

/**
 * The receives settlement may need for one event whose payment's request is still running: one per short retry (the
 * first receive asks for 1 s, the second for 2 s), the one that waits out the owner's lease, and the one after it
 * that settles (the owner has committed by then, or its operation can be taken over). A queue that moves the event to
 * its DLQ sooner loses its receipt.
 */
export const SETTLEMENT_RECEIVES_NEEDED = SETTLEMENT_SHORT_RETRIES + 2;

/** The outside systems the service calls, each with its own HTTP timeout setting. */
export type OutsideSystem = 'processor' | 'warehouse' | 'mailer';

/**
 * Each outside system's HTTP timeout where no setting gives one (`PROCESSOR_TIMEOUT_MS`, `WAREHOUSE_TIMEOUT_MS`,
 * `MAILER_TIMEOUT_MS`); the deployed environments set theirs (lib/infra/environments.ts).
 */
export const DEFAULT_CALL_TIMEOUTS_MS: Readonly<Record<OutsideSystem, number>> = {
  processor: 8_000,
  warehouse: 5_000,
  mailer: 5_000,
};

/**
 * How long after its client gave up a booking may still land at the warehouse (its queue and its processing), where
 * `WAREHOUSE_PROCESSING_WINDOW_MS` sets none: until the client's timeout plus this has passed since a booking was
 * sent, a lookup that finds nothing proves nothing.
 */
export const DEFAULT_WAREHOUSE_PROCESSING_WINDOW_MS = 30_000;

/** A function that runs under an idempotency lease (or next to ones that do), and what invokes it. */
export interface TimedFunction {
  readonly name: string;
  readonly timeoutMs: number;
  readonly trigger: 'route' | 'authorizer' | 'queue' | 'schedule';
  /**
   * The outside calls one invocation makes, one after another, at its longest (a system twice if it calls it twice):
   * their timeouts, added up with {@link STORE_WRITES_MARGIN_MS}, must fit in the function's timeout.
   */
  readonly calls?: readonly OutsideSystem[];
}

export interface Timings {
  readonly leaseMs: number;
  readonly ttlMs: number;
  /** How long the API gateway waits for a route's function before answering 504. */
  readonly apiIntegrationMs: number;
  readonly processorTimeoutMs: number;
  readonly warehouseTimeoutMs: number;
  readonly mailerTimeoutMs: number;
  /** The settlement queue's visibility timeout. */
  readonly queueVisibilityMs: number;
  /** Receives before the settlement queue moves a message to its DLQ (its redrive policy's maxReceiveCount). */
  readonly queueMaxReceiveCount: number;
  /** How often the completer looks for operations whose client never came back. */
  readonly completerPeriodMs: number;
  readonly functions: readonly TimedFunction[];
}

/** Operations the completer works on at once: their processor lookups and DynamoDB writes overlap. */
export const COMPLETER_CONCURRENCY = 8;

/** Operations the completer reads from the recovery index at a time; a run reads page after page. */
export const COMPLETER_PAGE_SIZE = 100;

/**
 * The completer stops taking operations once less than the processor's timeout plus this is left of its own: the
 * last lookup it starts may take the processor's whole timeout and still leave this long for its DynamoDB writes.
 */
export const COMPLETER_STOP_MARGIN_MS = 250;

/**
 * What a function leaves, beyond its outside calls, for its store's round trips: the claim, a checkpoint after each
 * call, the completion.
 */
export const STORE_WRITES_MARGIN_MS = 500;

/** API Gateway's default maximum integration timeout for a REST API. */
const MAX_INTEGRATION_MS = 29_000;
const MAX_LAMBDA_TIMEOUT_MS = 900_000;
const MAX_VISIBILITY_TIMEOUT_MS = 12 * 60 * 60 * 1000;

/**
 * Every way these timings break exactly-once processing or lose a payment, as sentences (empty when there is none).
 *
 * - lease ≥ every function's timeout + the engine's lease margin: a lease that runs out while its owner still runs
 *   lets a retry take the key over and do the work a second time. (The adapters also raise a claim's lease to cover
 *   the function's remaining time; this keeps the configured lease, on which every bound below is computed, true.)
 * - a route's timeout > the integration timeout: the gateway gives up first and the function still records its
 *   result, so the client's retry replays it instead of finding a claim orphaned by a killed function.
 * - processor timeout < the timeout of a function that calls it: a slow processor is an error the function handles.
 *   (All of a function's outside calls, one after another, are checked by {@link callChainViolations}.)
 * - ttl ≥ lease: the store refuses a shorter one. No longer bound than that: an unfinished recoverable operation
 *   never expires (the store's rule, whatever the backlog), so the TTL is only how long a finished one replays.
 * - completer period < lease: recovery looks for an operation whose client never came back within a period of its
 *   becoming due (a lease after its last attempt).
 * - completer timeout > processor timeout + {@link COMPLETER_STOP_MARGIN_MS}: otherwise a run never takes an
 *   operation, and a payment whose client never came back is never recorded.
 * - lease ≤ visibility timeout: a message redelivered after its consumer died finds the dead claim's lease run out,
 *   instead of burning a receive (towards the DLQ) on "still in progress".
 * - receives ≥ {@link SETTLEMENT_RECEIVES_NEEDED}: settlement's waits for a live owner (two short retries, then the
 *   rest of the owner's lease) fit before the queue gives the event up to its DLQ.
 */
export function timingViolations(timings: Timings): string[] {
  const { leaseMs, ttlMs, apiIntegrationMs, processorTimeoutMs, queueVisibilityMs, completerPeriodMs } = timings;
  const violations: string[] = [];
  const { warehouseTimeoutMs, mailerTimeoutMs } = timings;
  const all = {
    leaseMs,
    ttlMs,
    apiIntegrationMs,
    processorTimeoutMs,
    warehouseTimeoutMs,
    mailerTimeoutMs,
    queueVisibilityMs,
    completerPeriodMs,
  };
  for (const [name, value] of Object.entries(all)) {
    if (!(Number.isFinite(value) && value > 0)) violations.push(`${name} must be positive, got ${value}`);
  }
  if (apiIntegrationMs > MAX_INTEGRATION_MS) {
    violations.push(
      `API integration timeout ${duration(apiIntegrationMs)} exceeds API Gateway's ${duration(MAX_INTEGRATION_MS)} maximum`,
    );
  }
  if (ttlMs < leaseMs) {
    violations.push(`ttl (${duration(ttlMs)}) must be at least the lease (${duration(leaseMs)})`);
  }
  if (completerPeriodMs >= leaseMs) {
    violations.push(
      `the completer's period (${duration(completerPeriodMs)}) must be shorter than the lease (${duration(leaseMs)}): ` +
        'an operation whose client never came back would wait more than a lease for recovery to look',
    );
  }
  for (const fn of timings.functions) {
    if (fn.timeoutMs > MAX_LAMBDA_TIMEOUT_MS) {
      violations.push(
        `${fn.name} timeout ${duration(fn.timeoutMs)} exceeds Lambda's ${duration(MAX_LAMBDA_TIMEOUT_MS)} maximum`,
      );
    }
    if (leaseMs < fn.timeoutMs + LEASE_MARGIN_MS) {
      violations.push(
        `lease (${duration(leaseMs)}) must be at least ${fn.name}'s timeout (${duration(fn.timeoutMs)}) plus the ` +
          `engine's ${duration(LEASE_MARGIN_MS)} margin for clock skew`,
      );
    }
    if (fn.trigger === 'route' && fn.timeoutMs <= apiIntegrationMs) {
      violations.push(
        `${fn.name}'s timeout (${duration(fn.timeoutMs)}) must be longer than the API integration timeout (${duration(apiIntegrationMs)})`,
      );
    }
    if (fn.calls?.includes('processor') && processorTimeoutMs >= fn.timeoutMs) {
      violations.push(
        `processor timeout (${duration(processorTimeoutMs)}) must be shorter than ${fn.name}'s timeout (${duration(fn.timeoutMs)})`,
      );
    }
    if (fn.trigger === 'schedule' && completerWindowMs(fn.timeoutMs, processorTimeoutMs) <= 0) {
      violations.push(
        `${fn.name}'s timeout (${duration(fn.timeoutMs)}) must be longer than the processor timeout ` +
          `(${duration(processorTimeoutMs)}) plus ${COMPLETER_STOP_MARGIN_MS}ms: a run would never take an operation`,
      );
    }
  }
  if (queueVisibilityMs > MAX_VISIBILITY_TIMEOUT_MS) {
    violations.push(
      `settlement visibility timeout ${duration(queueVisibilityMs)} exceeds SQS's ${duration(MAX_VISIBILITY_TIMEOUT_MS)}`,
    );
  }
  if (!(timings.queueMaxReceiveCount >= SETTLEMENT_RECEIVES_NEEDED)) {
    violations.push(
      `the settlement queue's receive count (${timings.queueMaxReceiveCount}) must be at least ` +
        `${SETTLEMENT_RECEIVES_NEEDED}: settlement waits for a live owner over that many receives (1 s, 2 s, then ` +
        "the rest of the owner's lease), and an event moved to the DLQ sooner never sends its receipt",
    );
  }
  if (leaseMs > queueVisibilityMs) {
    violations.push(
      `lease (${duration(leaseMs)}) must not exceed the settlement visibility timeout (${duration(queueVisibilityMs)})`,
    );
  }
  return violations;
}

/**
 * Every function whose outside calls, one after another, plus {@link STORE_WRITES_MARGIN_MS}, can outlast its
 * timeout, as sentences (empty when there is none): such a function is killed mid-call when each outside system is
 * slow within its timeout, its operation left to a retry or recovery a lease later (and, for a call that does not
 * dedupe, to a lookup that must not conclude too early). A deployment refuses these with the rules above; the local
 * stack refuses those and warns of these (its tests shorten function timeouts below what an order's calls can take).
 */
export function callChainViolations(timings: Timings): string[] {
  const timeoutMs: Record<OutsideSystem, number> = {
    processor: timings.processorTimeoutMs,
    warehouse: timings.warehouseTimeoutMs,
    mailer: timings.mailerTimeoutMs,
  };
  const violations: string[] = [];
  for (const fn of timings.functions) {
    const calls = fn.calls ?? [];
    if (calls.length === 0) continue;
    const chainMs = calls.reduce((sum, call) => sum + timeoutMs[call], 0);
    if (chainMs + STORE_WRITES_MARGIN_MS <= fn.timeoutMs) continue;
    const each = calls.map((call) => `${call} ${duration(timeoutMs[call])}`).join(' + ');
    violations.push(
      `${fn.name}'s outside calls one after another (${each} = ${duration(chainMs)}) plus ` +
        `${duration(STORE_WRITES_MARGIN_MS)} for its store's writes must fit in its timeout (${duration(fn.timeoutMs)})`,
    );
  }
  return violations;
}

/** How long one completer run takes new operations: its timeout, less a last lookup and the stop margin. */
export function completerWindowMs(completerTimeoutMs: number, processorTimeoutMs: number): number {
  return completerTimeoutMs - processorTimeoutMs - COMPLETER_STOP_MARGIN_MS;
}

/** What the completer gets through under a set of timings. Durations in milliseconds. */
export interface RecoveryThroughput {
  /** How long one run takes new operations. */
  readonly windowMs: number;
  /**
   * The longest from one run's start to the next one's: a run lasts at most its window plus one operation, and the
   * next starts at the first tick of the schedule after it (EventBridge, or the local stack's timer).
   */
  readonly cycleMs: number;
  /** Operations one run finishes: every worker takes one after another until the window closes. */
  readonly perRun: number;
  readonly perMinute: number;
  /**
   * The longest from `backlog` operations becoming due at once to the last of them finished: a cycle until the
   * first run (one may have just ended), then a cycle per run's worth. Add the lease for "from the last attempt".
   */
  drainMs(backlog: number): number;
}

/**
 * What the completer gets through when each operation (its takeover, the processor lookup, the commit) takes
 * `operationMs`. With `operationMs` at its worst, {@link worstOperationMs}, this is a floor the settings guarantee
 * however slowly the processor answers within its timeout; with a measured one, what to expect.
 */
export function recoveryThroughput(timings: Timings, operationMs: number): RecoveryThroughput {
  const completer = timings.functions.find((fn) => fn.trigger === 'schedule');
  if (!completer) throw new Error('no completer (a function on a schedule) in these timings');
  const windowMs = Math.max(0, completerWindowMs(completer.timeoutMs, timings.processorTimeoutMs));
  const runMs = Math.min(completer.timeoutMs, windowMs + operationMs);
  const cycleMs = timings.completerPeriodMs * Math.max(1, Math.ceil(runMs / timings.completerPeriodMs));
  const perRun = windowMs > 0 ? COMPLETER_CONCURRENCY * Math.ceil(windowMs / operationMs) : 0;
  return {
    windowMs,
    cycleMs,
    perRun,
    perMinute: Math.floor((perRun * 60_000) / cycleMs),
    drainMs: (backlog) => cycleMs * (1 + Math.ceil(backlog / perRun)),
  };
}

/**
 * One operation at its slowest within the settings: a lookup that takes the processor's whole timeout, and the
 * operation's DynamoDB requests (a read and a takeover before it, a read and the commit after) within the stop margin
 * between them, as the completer's stop rule assumes.
 */
export function worstOperationMs(timings: Pick<Timings, 'processorTimeoutMs'>): number {
  return timings.processorTimeoutMs + COMPLETER_STOP_MARGIN_MS;
}

/** `90s`, `1500ms`: whole seconds as seconds, anything else in milliseconds. */
export function duration(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}
