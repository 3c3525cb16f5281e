import { setTimeout as sleep } from 'node:timers/promises';
import { SIGNATURE_HEADER, signPayload } from '../webhooks/signature';
import type { ProcessorEvent } from './events';

/**
 * How delivery of a new event is retried, as real processors do (for days, with backoff), in a window a local run
 * can live with: at most `attempts` in all, within `windowMs` of the first. Before retry n it waits
 * `min(maxDelayMs, baseDelayMs * 2^(n-1))`, jittered down to as little as half that, so that events failing together
 * do not come back together; no retry is started that would begin past the window.
 */
export interface WebhookRetry {
  readonly attempts: number;
  readonly baseDelayMs: number;
  /** The longest single wait. Default: {@link DEFAULT_WEBHOOK_RETRY}'s. */
  readonly maxDelayMs?: number;
  /** No retry begins later than this after the first attempt. Default: {@link DEFAULT_WEBHOOK_RETRY}'s. */
  readonly windowMs?: number;
}

/**
 * About ten minutes of retries: long enough that an event whose first deliveries met a live owner (the receiver
 * answering 409 or 503 while the payment's request still runs) lands once it has finished, rather than by luck.
 * Waits of 0.5 s, 1 s, 2 s ... up to a minute: 15 attempts fit in the window.
 */
export const DEFAULT_WEBHOOK_RETRY: Required<WebhookRetry> = {
  attempts: 15,
  baseDelayMs: 500,
  maxDelayMs: 60_000,
  windowMs: 10 * 60_000,
};

/** The environment variable that sets the retry window, in seconds, where the sandbox is started. */
export const WEBHOOK_RETRY_WINDOW_ENV = 'PROCESSOR_WEBHOOK_RETRY_WINDOW_SECONDS';

/**
 * The retry schedule the environment asks for: {@link DEFAULT_WEBHOOK_RETRY} with its window from
 * `PROCESSOR_WEBHOOK_RETRY_WINDOW_SECONDS` when set (0: no retries). Throws, naming the variable, on anything else
 * than a number of seconds.
 */
export function webhookRetryFromEnv(env: NodeJS.ProcessEnv): WebhookRetry {
  const raw = env[WEBHOOK_RETRY_WINDOW_ENV];
  if (raw === undefined || raw === '') return DEFAULT_WEBHOOK_RETRY;
  const seconds = Number(raw);
  if (!/^\d+(\.\d+)?$/.test(raw.trim()) || !Number.isFinite(seconds)) {
    throw new Error(`${WEBHOOK_RETRY_WINDOW_ENV} must be a number of seconds (0 or more), got ${JSON.stringify(raw)}`);
  }
  return { ...DEFAULT_WEBHOOK_RETRY, windowMs: seconds * 1000 };
}

/**
 * The wait before retry `retry` (1 for the first): exponential, capped, and jittered within its upper half, so it is
 * never under half the nominal wait (a retry never comes back at once) and never over the cap.
 */
export function retryDelayMs(retry: WebhookRetry, attemptsSoFar: number, random: () => number = Math.random): number {
  const cap = retry.maxDelayMs ?? DEFAULT_WEBHOOK_RETRY.maxDelayMs;
  const nominal = Math.min(cap, retry.baseDelayMs * 2 ** (attemptsSoFar - 1));
  return nominal / 2 + random() * (nominal / 2);
}

/** A receiver that takes longer than this to answer counts as a failed attempt. */
const ATTEMPT_TIMEOUT_MS = 5_000;

export interface WebhookSenderOptions {
  readonly url: string;
  readonly secret: string;
  /** Epoch milliseconds; each attempt is signed with the time it is sent. */
  readonly clock: () => number;
  readonly retry: WebhookRetry;
  /** Aborted when the sandbox closes: in-flight requests and pending retries stop. */
  readonly signal: AbortSignal;
  /** The jitter's source, in [0, 1). Default `Math.random`. */
  readonly random?: () => number;
}

/** One attempt to deliver an event, as the receiver answered it. */
export interface Delivery {
  readonly event_id: string;
  /** 1 for the first attempt, counting up through retries; a resend is always attempt 1. */
  readonly attempt: number;
  readonly ok: boolean;
  /** The receiver's status code, or `null` when no response came (refused, reset, timed out). */
  readonly status: number | null;
  readonly error?: string;
}

/** Posts signed events to one webhook endpoint and keeps a log of every attempt. */
export class WebhookSender {
  readonly #options: WebhookSenderOptions;
  readonly #log: Delivery[] = [];
  readonly #inFlight = new Set<Promise<void>>();

  constructor(options: WebhookSenderOptions) {
    this.#options = options;
  }

  /** Where events are delivered. */
  get url(): string {
    return this.#options.url;
  }

  /**
   * Delivers a new event in the background, retrying on a network error or a non-2xx answer. Returns at once:
   * the charge response must not wait for the merchant's webhook endpoint.
   */
  dispatch(event: ProcessorEvent): void {
    const delivery = this.#deliverWithRetry(event).finally(() => this.#inFlight.delete(delivery));
    this.#inFlight.add(delivery);
  }

  /** One attempt, freshly signed, with no retry: what `POST /__webhooks/resend` uses to report each outcome. */
  async deliverOnce(event: ProcessorEvent, attempt = 1): Promise<Delivery> {
    const delivery = await this.#post(event, attempt);
    this.#log.push(delivery);
    return delivery;
  }

  /** Every attempt so far, in the order they completed. */
  deliveries(): Delivery[] {
    return [...this.#log];
  }

  /** Resolves once no background delivery is running (after the lifetime signal, that is promptly). */
  async settle(): Promise<void> {
    await Promise.allSettled([...this.#inFlight]);
  }

  async #deliverWithRetry(event: ProcessorEvent): Promise<void> {
    const { retry, signal, random } = this.#options;
    const windowMs = retry.windowMs ?? DEFAULT_WEBHOOK_RETRY.windowMs;
    // Real time, not the injectable clock (which stamps signatures and may stand still): every wait is bounded.
    const firstAt = performance.now();
    for (let attempt = 1; attempt <= retry.attempts && !signal.aborted; attempt += 1) {
      const delivery = await this.deliverOnce(event, attempt);
      if (delivery.ok || attempt === retry.attempts) return;
      const delayMs = retryDelayMs(retry, attempt, random);
      if (performance.now() - firstAt + delayMs > windowMs) return; // the next try would start past the window
      try {
        await sleep(delayMs, undefined, { signal });
      } catch {
        return; // the sandbox is closing: the pending retry is cancelled with its timer
      }
    }
  }

  async #post(event: ProcessorEvent, attempt: number): Promise<Delivery> {
    const { url, secret, clock, signal } = this.#options;
    try {
      const rawBody = JSON.stringify(event);
      const signature = signPayload(rawBody, secret, Math.floor(clock() / 1000));
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', [SIGNATURE_HEADER]: signature },
        body: rawBody,
        signal: AbortSignal.any([signal, AbortSignal.timeout(ATTEMPT_TIMEOUT_MS)]),
      });
      await response.arrayBuffer(); // drain, so the connection goes back to the pool
      return { event_id: event.id, attempt, ok: response.ok, status: response.status };
    } catch (error) {
      return { event_id: event.id, attempt, ok: false, status: null, error: describe(error) };
    }
  }
}

/** undici reports "fetch failed" and keeps the useful part (ECONNREFUSED, "other side closed") in `cause`. */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${error.message}${cause}`;
}
