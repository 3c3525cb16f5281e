import ky, { isHTTPError } from 'ky';
import { readBody, readProblem } from './answer.js';
import { AttemptLog, type Fetch } from './attempt-log.js';
import { startDeadline } from './deadline.js';
import { type Attempt, AttemptError, type OperationResult, type Problem } from './result.js';
import { retryLoop } from './retry-loop.js';
import { isRetryStatus, type RetryPolicy } from './retry-policy.js';

/** The methods an `Idempotency-Key` is for: the ones a plain retry could repeat the effect of. */
export type IdempotentMethod = 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface SendOptions {
  /** Stops the operation: the attempt in flight is cancelled, and no retry follows. */
  readonly signal?: AbortSignal;
  /** Told of each attempt as it ends (status, wait, `Retry-After`): for logs and progress. */
  readonly onAttempt?: (attempt: Attempt) => void;
}

/**
 * One logical operation, prepared and not yet sent: the same method, URL, headers, body and key on every `send()`,
 * however often it is called. `TResult` is what its `parse` makes of a 2xx body; `TBody` is the body as given.
 */
export interface Operation<TResult = unknown, TBody = unknown> {
  /** Fixed before the first send. Persist it (with the body) first, to continue the operation after a crash. */
  readonly idempotencyKey: string;
  readonly method: IdempotentMethod;
  /** Absolute, resolved against the client's `baseUrl`. */
  readonly url: string;
  /** As given; what is sent is its JSON, taken once when the operation was prepared. */
  readonly body: TBody;
  /**
   * Sends the operation, retrying under the same key until it has a final answer, runs out of attempts or time, or
   * is aborted. Never throws for an HTTP answer (whatever its body), a network failure, a timeout or an abort: see
   * {@link OperationResult}.
   */
  send(options?: SendOptions): Promise<OperationResult<TResult>>;
}

/** What an operation takes from its client. */
export interface OperationSettings<TResult> {
  readonly method: IdempotentMethod;
  readonly url: string;
  /** Every header of the request, `Idempotency-Key` included. */
  readonly headers: Headers;
  /** The body's JSON, or undefined for none. */
  readonly json: string | undefined;
  readonly parse: (body: unknown) => TResult;
  readonly isInFlight: (problem: Problem) => boolean;
  readonly policy: RetryPolicy;
  readonly fetch: Fetch;
  readonly now: () => number;
  readonly random: () => number;
}

/** The one implementation of {@link Operation}, made by `RetrySafeClient.prepare` (not exported by the package). */
export class PreparedOperation<TResult, TBody> implements Operation<TResult, TBody> {
  readonly #settings: OperationSettings<TResult>;

  constructor(
    settings: OperationSettings<TResult>,
    readonly idempotencyKey: string,
    readonly body: TBody,
  ) {
    this.#settings = settings;
  }

  get method(): IdempotentMethod {
    return this.#settings.method;
  }

  get url(): string {
    return this.#settings.url;
  }

  async send(options: SendOptions = {}): Promise<OperationResult<TResult>> {
    const { idempotencyKey } = this;
    const settings = this.#settings;
    const { policy, now } = settings;
    if (options.signal?.aborted) {
      return { kind: 'no-answer', reason: AttemptError.aborted, idempotencyKey, attempts: [] };
    }
    const deadlineAt = now() + policy.deadlineMs;
    const deadline = startDeadline(policy.deadlineMs, options.signal);
    const log = new AttemptLog({
      fetch: settings.fetch,
      now,
      attemptTimeoutMs: policy.attemptTimeoutMs,
      deadline: deadline.expired,
      caller: options.signal,
      onAttempt: options.onAttempt,
    });
    const isRetryable = (status: number, problem: Problem) =>
      isRetryStatus(status) && (status !== 409 || settings.isInFlight(problem));
    const retry = retryLoop({
      policy,
      method: settings.method.toLowerCase(),
      retryable: async (response) => isRetryable(response.status, await readProblem(response.clone())),
      deadlineAt,
      stopped: deadline.signal,
      now,
      random: settings.random,
    });
    try {
      const response = await ky(settings.url, {
        method: settings.method,
        headers: settings.headers,
        body: settings.json,
        fetch: log.fetch,
        signal: deadline.signal,
        // The attempt log times each attempt out itself (see AttemptLog): ky's timer would leave the attempt running.
        timeout: false,
        retry: retry.options,
      });
      const { status, headers } = response;
      const { attempts } = log;
      const read = readBody(status, await response.text(), settings.parse);
      if (!read.ok) {
        const { reason, detail } = read;
        return { kind: 'invalid-response', status, reason, detail, idempotencyKey, attempts };
      }
      const replayed = headers.get('idempotent-replayed') === 'true';
      return { kind: 'success', status, body: read.body, headers, replayed, idempotencyKey, attempts };
    } catch (error) {
      if (isHTTPError(error)) {
        const { status } = error.response;
        const problem = await readProblem(error.response);
        const { attempts } = log;
        if (retry.retryAt !== undefined) {
          return { kind: 'retry-later', status, problem, retryAt: retry.retryAt, idempotencyKey, attempts };
        }
        return { kind: 'problem', status, problem, retryable: isRetryable(status, problem), idempotencyKey, attempts };
      }
      return {
        kind: 'no-answer',
        reason: noAnswerReason(error, deadline.expired, options.signal, log.attempts),
        idempotencyKey,
        attempts: log.attempts,
      };
    } finally {
      deadline.clear();
    }
  }
}

/**
 * Why no answer came: the deadline or the caller, if either stopped the operation; otherwise what the last attempt
 * ran into. Anything else is not an outcome but a bug, and is thrown.
 */
function noAnswerReason(
  error: unknown,
  expired: AbortSignal,
  caller: AbortSignal | undefined,
  attempts: readonly Attempt[],
): AttemptError {
  if (expired.aborted) return AttemptError.deadline;
  if (caller?.aborted) return AttemptError.aborted;
  const last = attempts.at(-1);
  if (last?.kind === 'error') return last.error;
  throw error;
}
