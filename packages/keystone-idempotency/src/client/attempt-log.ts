import { type Attempt, AttemptError } from './result.js';

/** A `fetch` as the client calls it; the global `fetch` of a browser or of Node >= 20 fits. */
export type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export interface AttemptLogOptions {
  readonly fetch: Fetch;
  readonly now: () => number;
  /** One attempt's budget, body included: past it the attempt is cancelled and counts as a timeout. */
  readonly attemptTimeoutMs: number;
  /** Fires when the operation's deadline passes. */
  readonly deadline: AbortSignal;
  /** The caller's own signal, if any. */
  readonly caller: AbortSignal | undefined;
  /** Told of each attempt as it ends; what it throws is ignored (a logging bug must not become a retry). */
  readonly onAttempt: ((attempt: Attempt) => void) | undefined;
}

/** Statuses whose responses carry no body, and which `new Response()` refuses one for. */
const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);

/**
 * Sits between the retry loop and the real `fetch`, and writes down every attempt: when it started, how long the
 * client had waited, and what came back. It also reads each response whole and hands on a copy, so that every
 * attempt's body is released (retried responses would otherwise hold their connection) and the final one can still
 * be parsed; the bodies of idempotent JSON APIs are small documents.
 *
 * It also owns each attempt's cancellation: the attempt gets a signal of its own, fired by the deadline, the caller,
 * the attempt's timeout, or the request's own signal, and held here for as long as the attempt runs. The request's
 * signal alone is not enough: ky sends every retry as a clone of the request, and in Node's fetch a clone's signal
 * stops following its source after a garbage collection (nodejs/undici#4068), so an abort or a deadline was lost
 * and a retried attempt ran on until the attempt timeout.
 */
export class AttemptLog {
  readonly attempts: Attempt[] = [];
  readonly #options: AttemptLogOptions;
  #lastEndedAt: number | undefined;

  constructor(options: AttemptLogOptions) {
    this.#options = options;
  }

  /** The `fetch` to give the retry loop. */
  readonly fetch: Fetch = async (input, init) => {
    const { now, deadline, caller, attemptTimeoutMs } = this.#options;
    const startedAt = now();
    const base = {
      number: this.attempts.length + 1,
      waitedMs: this.#lastEndedAt === undefined ? 0 : Math.max(0, startedAt - this.#lastEndedAt),
    };
    const attempt = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      attempt.abort(new DOMException(`the attempt outlived its ${attemptTimeoutMs} ms`, 'TimeoutError'));
    }, attemptTimeoutMs);
    const sources = [deadline, caller, input instanceof Request ? input.signal : init?.signal].filter(
      (signal): signal is AbortSignal => signal instanceof AbortSignal,
    );
    const stop = (event: Event) => attempt.abort((event.target as AbortSignal).reason);
    for (const signal of sources) {
      if (signal.aborted) attempt.abort(signal.reason);
      else signal.addEventListener('abort', stop, { once: true });
    }
    let response: Response;
    let text: string;
    try {
      response = await this.#options.fetch(input, { ...init, signal: attempt.signal });
      text = await response.text();
    } catch (error) {
      this.#record({ ...base, durationMs: now() - startedAt, kind: 'error', error: this.#classify(timedOut) });
      throw error;
    } finally {
      clearTimeout(timer);
      for (const signal of sources) signal.removeEventListener('abort', stop);
    }
    const headers = new Headers(response.headers);
    const retryAfter = usableRetryAfter(headers.get('retry-after'));
    // An unusable Retry-After is dropped, so the retry loop falls back to its own backoff instead of misreading it.
    if (retryAfter === null) headers.delete('retry-after');
    this.#record({
      ...base,
      durationMs: now() - startedAt,
      kind: 'response',
      status: response.status,
      replayed: headers.get('idempotent-replayed') === 'true',
      retryAfter,
      problemType: problemTypeOf(headers, text),
    });
    const body = NULL_BODY_STATUSES.has(response.status) ? null : text;
    return new Response(body, { status: response.status, statusText: response.statusText, headers });
  };

  /** What stopped an attempt that got no answer: the deadline, the caller, its own timeout, or else the network. */
  #classify(timedOut: boolean): AttemptError {
    if (this.#options.deadline.aborted) return AttemptError.deadline;
    if (this.#options.caller?.aborted) return AttemptError.aborted;
    if (timedOut) return AttemptError.timeout;
    return AttemptError.network;
  }

  #record(attempt: Attempt): void {
    this.attempts.push(attempt);
    this.#lastEndedAt = this.#options.now();
    try {
      this.#options.onAttempt?.(attempt);
    } catch {
      // Ignored on purpose: see AttemptLogOptions.onAttempt.
    }
  }
}

/**
 * RFC 9110 §10.2.3: `Retry-After` is delay-seconds (a non-negative integer) or an HTTP-date. Anything else is not
 * a usable instruction.
 */
export function usableRetryAfter(value: string | null): string | null {
  if (value === null) return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return trimmed;
  return /[a-z]/i.test(trimmed) && !Number.isNaN(Date.parse(trimmed)) ? trimmed : null;
}

function problemTypeOf(headers: Headers, text: string): string | null {
  if (!headers.get('content-type')?.toLowerCase().startsWith('application/problem+json')) return null;
  try {
    const type = (JSON.parse(text) as { type?: unknown }).type;
    return typeof type === 'string' ? type : null;
  } catch {
    return null;
  }
}
