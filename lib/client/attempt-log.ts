import { type Attempt, AttemptError } from './result.js';

/** A `fetch` as the client calls it; the global `fetch` of a browser or of Node >= 20 fits. */
export type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export interface AttemptLogOptions {
  readonly fetch: Fetch;
  readonly now: () => number;
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
    const { now } = this.#options;
    const startedAt = now();
    const base = {
      number: this.attempts.length + 1,
      waitedMs: this.#lastEndedAt === undefined ? 0 : Math.max(0, startedAt - this.#lastEndedAt),
    };
    let response: Response;
    let text: string;
    try {
      response = await this.#options.fetch(input, init);
      text = await response.text();
    } catch (error) {
      const signal = input instanceof Request ? input.signal : init?.signal;
      this.#record({ ...base, durationMs: now() - startedAt, kind: 'error', error: this.#classify(signal) });
      throw error;
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

  /** Which of the signals stopped an attempt; an abort that is neither was the retry loop's own attempt timeout. */
  #classify(signal: AbortSignal | null | undefined): AttemptError {
    if (this.#options.deadline.aborted) return AttemptError.deadline;
    if (this.#options.caller?.aborted) return AttemptError.aborted;
    if (signal?.aborted) return AttemptError.timeout;
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
