/**
 * The processor's own idempotency memory: what a real processor keeps per `Idempotency-Key`, in memory.
 *
 * A key is claimed by the first request that carries it; the claim stores the request's fingerprint and a promise
 * of its response. Requests arriving with the same key then either replay that response (same fingerprint) or
 * are refused (different fingerprint). A request arriving while the first is still working awaits the same
 * promise instead of working again, so a client retrying mid-flight converges on the one result:
 *
 *   request A ──claim──[ working ……………………… ]──response R──▶ A
 *   request B ─────────── same key ──await────────────────────▶ B gets R (replayed)
 *   request C ─────────── other body ──▶ mismatch, at once
 *
 * The work may decline to be remembered (a simulated 503 charges nothing, so a retry must be free to try again);
 * it then releases the key and any waiter takes its turn at claiming it. Entries never expire: a sandbox lives
 * for one test run or demo (a real processor forgets keys after about 24 hours).
 */

/** What the work of a first request produced, and whether later requests with the key should see it again. */
export interface Execution<R> {
  readonly response: R;
  readonly remember: boolean;
}

/** How a request with a key was served. */
export type LedgerOutcome<R, E extends Execution<R>> =
  | { readonly kind: 'executed'; readonly execution: E }
  | { readonly kind: 'replayed'; readonly response: R }
  | { readonly kind: 'mismatch' };

interface Entry<R> {
  readonly fingerprint: string;
  /** The remembered response, or `undefined` once the work released the key. */
  readonly settled: Promise<R | undefined>;
}

/** One key space (a processor scopes keys per endpoint family: charges and emails each get a ledger). */
export class IdempotencyLedger<R> {
  readonly #entries = new Map<string, Entry<R>>();
  /** Keys whose first request is still doing its work. */
  readonly #running = new Set<string>();

  /** Whether the first request with `key` is still working (its outcome is not known yet). */
  isRunning(key: string): boolean {
    return this.#running.has(key);
  }

  /**
   * Runs `work` if this request is the first with `key`, otherwise replays or refuses.
   *
   * @example
   * const outcome = await ledger.run(key, fingerprint, async () => ({ response: makeCharge(), remember: true }));
   * if (outcome.kind === 'replayed') send(outcome.response, { 'Idempotent-Replayed': 'true' });
   */
  async run<E extends Execution<R>>(
    key: string,
    fingerprint: string,
    work: () => Promise<E>,
  ): Promise<LedgerOutcome<R, E>> {
    for (;;) {
      const entry = this.#entries.get(key);
      if (!entry) return { kind: 'executed', execution: await this.#claimAndRun(key, fingerprint, work) };
      if (entry.fingerprint !== fingerprint) return { kind: 'mismatch' };
      const response = await entry.settled;
      if (response !== undefined) return { kind: 'replayed', response };
      // The first request released the key without a result: loop and compete for the claim.
    }
  }

  /**
   * The claim is recorded synchronously, before the first `await`: in a single-threaded event loop, that is what
   * makes "check for an entry, then claim" atomic against every other request.
   */
  async #claimAndRun<E extends Execution<R>>(key: string, fingerprint: string, work: () => Promise<E>): Promise<E> {
    let settle!: (response: R | undefined) => void;
    const settled = new Promise<R | undefined>((resolve) => {
      settle = resolve;
    });
    this.#entries.set(key, { fingerprint, settled });
    this.#running.add(key);
    try {
      const execution = await work();
      if (!execution.remember) this.#entries.delete(key);
      settle(execution.remember ? execution.response : undefined);
      return execution;
    } catch (error) {
      this.#entries.delete(key);
      settle(undefined);
      throw error;
    } finally {
      this.#running.delete(key);
    }
  }
}
