/** One operation's time budget, as a signal that also carries the caller's own. */
export interface Deadline {
  /** Aborts when the deadline passes or the caller aborts, whichever is first. */
  readonly signal: AbortSignal;
  /** The deadline's own signal, to tell its abort from the caller's. */
  readonly expired: AbortSignal;
  /** Stops the timer; call it once the operation is over. */
  clear(): void;
}

/**
 * Starts the clock on an operation. A plain timer rather than `AbortSignal.timeout()`, whose Node implementation runs
 * on internal timers that a test's fake clock can't drive; the retry loop's waits use plain timers too, so one clock
 * rules both.
 */
export function startDeadline(ms: number, caller: AbortSignal | undefined): Deadline {
  const controller = new AbortController();
  const timer = setTimeout(() => {
    controller.abort(new DOMException(`the operation's deadline of ${ms} ms passed`, 'TimeoutError'));
  }, ms);
  return {
    signal: caller ? AbortSignal.any([caller, controller.signal]) : controller.signal,
    expired: controller.signal,
    clear: () => clearTimeout(timer),
  };
}
