import { errorFields, laterOf, noAnswer, type Unavailable } from '../runtime/outside-answer';
import { DEFAULT_WAREHOUSE_PROCESSING_WINDOW_MS } from '../timing/timing';

/**
 * The warehouse, from our side of the wire. Like many shipping APIs it takes no idempotency key: every booking is a
 * new shipment. What it offers instead is a lookup by our reference (the order id), which is how a booking whose
 * answer was lost is found rather than made again. A booking can land after its client gave up (it may sit in the
 * warehouse's queue for its processing window): {@link WarehouseClient.landsWithinMs} says how long after it started.
 */
export interface Shipment {
  readonly id: string;
  readonly reference: string;
  readonly items: readonly { readonly sku: string; readonly quantity: number }[];
  readonly status: string;
  /** Unix seconds. */
  readonly created: number;
}

/** The warehouse did not answer, or answered nothing we can use: a booking may or may not exist. */
export type WarehouseUnavailable = Unavailable;

/**
 * The warehouse refused the request for good (a 4xx other than 408, 409 and 429: a line over its limit, a reference it
 * won't take): sending it again changes nothing. `message` is the warehouse's own words, for logs.
 */
export type WarehouseRefusal = {
  readonly kind: 'refused';
  readonly status: number;
  readonly message: string;
  readonly code?: string;
  readonly param?: string;
};

export type BookingOutcome =
  | { readonly kind: 'booked'; readonly shipment: Shipment }
  | WarehouseRefusal
  | WarehouseUnavailable;

/**
 * What the lookup by reference says. `in_progress`: the warehouse is still making a booking for it (409), so "none"
 * can't be told yet; like `unavailable`, it is no answer.
 */
export type ShipmentLookup =
  | { readonly kind: 'found'; readonly shipment: Shipment }
  | { readonly kind: 'none' }
  | { readonly kind: 'in_progress'; readonly retryAfterSeconds?: number }
  | WarehouseRefusal
  | WarehouseUnavailable;

export interface WarehouseClientOptions {
  readonly baseUrl: string;
  /** How long a call waits for its answer. */
  readonly timeoutMs: number;
  /**
   * How long after its client gave up a booking may still land (the warehouse's queue and processing). Default:
   * {@link DEFAULT_WAREHOUSE_PROCESSING_WINDOW_MS}.
   */
  readonly processingWindowMs?: number;
  readonly fetch?: typeof fetch;
}

export class WarehouseClient {
  private readonly fetch: typeof fetch;

  constructor(private readonly options: WarehouseClientOptions) {
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  /**
   * How long after a booking was sent it may still land: the client's timeout plus the warehouse's processing window.
   * Until then a lookup that finds nothing proves nothing.
   */
  get landsWithinMs(): number {
    return this.options.timeoutMs + (this.options.processingWindowMs ?? DEFAULT_WAREHOUSE_PROCESSING_WINDOW_MS);
  }

  /** Books a shipment: a new one on every call, so only ever call it once the lookup found none. */
  async book(reference: string, items: Shipment['items']): Promise<BookingOutcome> {
    const answer = await this.request('/v1/shipments', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ reference, items }),
    });
    if (answer.kind !== 'ok') return answer;
    return { kind: 'booked', shipment: answer.body as Shipment };
  }

  /** The first shipment booked for `reference`, if any: the answer to "did my lost booking happen?". */
  async find(reference: string): Promise<ShipmentLookup> {
    const answer = await this.request(`/v1/shipments?reference=${encodeURIComponent(reference)}`, { method: 'GET' });
    if (answer.kind === 'unavailable' && answer.status === 409) {
      return {
        kind: 'in_progress',
        ...(answer.retryAfterSeconds ? { retryAfterSeconds: answer.retryAfterSeconds } : {}),
      };
    }
    if (answer.kind !== 'ok') return answer;
    const shipment = (answer.body as { data?: Shipment[] } | null)?.data?.[0];
    return shipment ? { kind: 'found', shipment } : { kind: 'none' };
  }

  /** One call: its JSON body, a refusal, or no usable answer. */
  private async request(
    path: string,
    init: RequestInit,
  ): Promise<{ readonly kind: 'ok'; readonly body: unknown } | WarehouseRefusal | WarehouseUnavailable> {
    let response: Response;
    try {
      response = await this.fetch(new URL(path, this.options.baseUrl), {
        ...init,
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
    } catch (error) {
      return noAnswer(error);
    }
    if (!response.ok) {
      const later = laterOf(response);
      if (later) return later;
    }
    const body: unknown = await response.json().catch(() => undefined);
    if (response.ok) {
      // An answer cut short or not JSON: the booking may or may not exist.
      return body === undefined
        ? { kind: 'unavailable', reason: 'server_error', status: response.status }
        : { kind: 'ok', body };
    }
    const { message, code, param } = errorFields(body);
    return {
      kind: 'refused',
      status: response.status,
      message: message ?? `the warehouse answered ${response.status}`,
      ...(code ? { code } : {}),
      ...(param ? { param } : {}),
    };
  }
}
