import ky, { isHTTPError, isTimeoutError } from 'ky';
import { readBody, readProblem } from './answer.js';
import { AttemptLog, type Fetch } from './attempt-log.js';
import { startDeadline } from './deadline.js';
import { checkIdempotencyKey, newIdempotencyKey } from './key.js';
import { ProblemType } from './problem-types.js';
import {
  type Attempt,
  AttemptError,
  type NewPayment,
  type Payment,
  type PaymentResult,
  type Problem,
} from './result.js';
import { retryLoop } from './retry-loop.js';
import { checkRetryPolicy, DEFAULT_RETRY_POLICY, isRetryStatus, type RetryPolicy } from './retry-policy.js';

export interface PaymentsClientOptions {
  /** Where the API is: `http://127.0.0.1:3000`, or a deployed stage's URL (its path is kept). */
  readonly baseUrl: string | URL;
  /** The account's API key, sent as `Authorization: Bearer <key>`. */
  readonly apiKey: string;
  /** Overrides of {@link DEFAULT_RETRY_POLICY}. */
  readonly retry?: Partial<RetryPolicy>;
  /** Default: the global `fetch`. */
  readonly fetch?: Fetch;
  /** Epoch milliseconds, for the attempt history. Default `Date.now`. */
  readonly now?: () => number;
  /** A value in [0, 1) for the backoff's jitter. Default `Math.random`. */
  readonly random?: () => number;
}

export interface SendOptions {
  /** Stops the operation: the attempt in flight is cancelled, and no retry follows. */
  readonly signal?: AbortSignal;
  /** Told of each attempt as it ends (status, wait, `Retry-After`): for logs and progress. */
  readonly onAttempt?: (attempt: Attempt) => void;
}

interface ClientConfig {
  readonly paymentsUrl: string;
  readonly apiKey: string;
  readonly policy: RetryPolicy;
  readonly fetch: Fetch;
  readonly now: () => number;
  readonly random: () => number;
}

/**
 * A client for the payments API that keeps the client's half of the idempotency promise: one key per logical
 * operation, known before the first send, reused on every retry; retries only what is safe and useful to retry,
 * waiting as long as the server asks (`Retry-After`) or else backing off with full jitter; bounded by attempts and a
 * deadline, and cancellable. Runs unchanged in browsers and in Node >= 20.
 *
 * The retry loop itself is ky's (a small, widely used fetch wrapper); this class decides what is retried and how
 * long to wait (`Retry-After` included: see `retryLoop`), and turns what happened into a typed result.
 *
 * @example
 * const client = new PaymentsClient({ baseUrl: 'http://127.0.0.1:3000', apiKey });
 * const payment = client.preparePayment({ amount: 4200, currency: 'usd', source: 'tok_visa' });
 * localStorage.setItem('checkout', JSON.stringify({ key: payment.idempotencyKey, body: payment.body })); // first
 * const result = await payment.send();
 * if (result.kind === 'success') show(result.payment);
 */
export class PaymentsClient {
  readonly #config: ClientConfig;

  constructor(options: PaymentsClientOptions) {
    if (!options.apiKey) throw new TypeError('PaymentsClient: apiKey is required');
    this.#config = {
      paymentsUrl: endpoint(options.baseUrl, 'payments'),
      apiKey: options.apiKey,
      policy: checkRetryPolicy({ ...DEFAULT_RETRY_POLICY, ...options.retry }),
      fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
      now: options.now ?? Date.now,
      random: options.random ?? Math.random,
    };
  }

  /**
   * One payment, not yet sent, with its key fixed: the caller's own (an order id it already stored, say), or a new
   * random one. Persist `idempotencyKey` (and the body) before calling `send()`: after a reload or a crash,
   * `preparePayment(body, { idempotencyKey })` with the stored key continues the same operation.
   */
  preparePayment(body: NewPayment, options: { readonly idempotencyKey?: string } = {}): PaymentOperation {
    const key =
      options.idempotencyKey === undefined ? newIdempotencyKey() : checkIdempotencyKey(options.idempotencyKey);
    return new PaymentOperation(this.#config, body, key);
  }
}

/** One logical payment: the same key and body on every `send()`, however often it is called. */
export class PaymentOperation {
  readonly #config: ClientConfig;

  constructor(
    config: ClientConfig,
    readonly body: NewPayment,
    readonly idempotencyKey: string,
  ) {
    this.#config = config;
  }

  /**
   * Sends the payment, retrying under the same key until it has a final answer, runs out of attempts or time, or
   * is aborted. Never throws for an HTTP answer, a network failure, a timeout or an abort: see {@link PaymentResult}.
   */
  async send(options: SendOptions = {}): Promise<PaymentResult> {
    const { idempotencyKey } = this;
    const { policy, now } = this.#config;
    if (options.signal?.aborted) {
      return { kind: 'no-answer', reason: AttemptError.aborted, idempotencyKey, attempts: [] };
    }
    const deadlineAt = now() + policy.deadlineMs;
    const deadline = startDeadline(policy.deadlineMs, options.signal);
    const log = new AttemptLog({
      fetch: this.#config.fetch,
      now,
      deadline: deadline.expired,
      caller: options.signal,
      onAttempt: options.onAttempt,
    });
    const retry = retryLoop({
      policy,
      method: 'post',
      retryable: async (response) => isRetryable(response.status, await readProblem(response.clone())),
      deadlineAt,
      stopped: deadline.signal,
      now,
      random: this.#config.random,
    });
    try {
      const response = await ky.post(this.#config.paymentsUrl, {
        json: this.body,
        headers: {
          Authorization: `Bearer ${this.#config.apiKey}`,
          'Idempotency-Key': idempotencyKey,
          Accept: 'application/json, application/problem+json',
        },
        fetch: log.fetch,
        signal: deadline.signal,
        timeout: policy.attemptTimeoutMs,
        retry: retry.options,
      });
      const { status } = response;
      const read = readBody(status, await response.text(), readPayment);
      if (!read.ok) {
        const { reason, detail } = read;
        return { kind: 'invalid-response', status, reason, detail, idempotencyKey, attempts: log.attempts };
      }
      return {
        kind: 'success',
        status,
        payment: read.body,
        replayed: response.headers.get('idempotent-replayed') === 'true',
        idempotencyKey,
        attempts: log.attempts,
      };
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

/** A 409 is retried only when it says the original is still running; the other retry statuses always are. */
function isRetryable(status: number, problem: Problem): boolean {
  return isRetryStatus(status) && (status !== 409 || problem.type === ProblemType.requestInFlight);
}

/** A payment as the API answers it; anything else (`null`, a payment without its id) is refused. */
function readPayment(body: unknown): Payment {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new TypeError('not a JSON object');
  const fields = body as Record<string, unknown>;
  for (const name of ['id', 'currency', 'source', 'status', 'charge_id', 'created_at'] as const) {
    if (typeof fields[name] !== 'string') throw new TypeError(`${name} is not a string`);
  }
  if (typeof fields.amount !== 'number') throw new TypeError('amount is not a number');
  for (const name of ['description', 'settled_at'] as const) {
    const value = fields[name];
    if (value !== null && typeof value !== 'string') throw new TypeError(`${name} is not a string or null`);
  }
  return body as Payment;
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
  if (isTimeoutError(error)) return AttemptError.timeout;
  const last = attempts.at(-1);
  if (last?.kind === 'error') return last.error;
  throw error;
}

/** `base` + `/path`, keeping any path `base` has (a deployed stage: `https://…/prod` → `https://…/prod/payments`). */
function endpoint(base: string | URL, path: string): string {
  const url = new URL(base);
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  return new URL(path, url).toString();
}
