import { setTimeout as sleep } from 'node:timers/promises';
import { SIGNATURE_HEADER, signPayload } from '../webhooks/signature';
import type { ProcessorEvent } from './events';

/** How delivery of a new event is retried: `attempts` in all, waiting `baseDelayMs`, then twice that, and so on. */
export interface WebhookRetry {
  readonly attempts: number;
  readonly baseDelayMs: number;
}

/** A few quick retries, like a real provider's first tries (theirs then continue for days; a sandbox need not). */
export const DEFAULT_WEBHOOK_RETRY: WebhookRetry = { attempts: 4, baseDelayMs: 100 };

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
    const { attempts, baseDelayMs } = this.#options.retry;
    for (let attempt = 1; attempt <= attempts && !this.#options.signal.aborted; attempt += 1) {
      const delivery = await this.deliverOnce(event, attempt);
      if (delivery.ok || attempt === attempts) return;
      try {
        await sleep(baseDelayMs * 2 ** (attempt - 1), undefined, { signal: this.#options.signal });
      } catch {
        return; // the sandbox is closing
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
