/**
 * The warehouse, from our side of the wire. Like many shipping APIs it takes no idempotency key: every booking is a
 * new shipment. What it offers instead is a lookup by our reference (the order id), which is how a booking whose
 * answer was lost is found rather than made again.
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
export type WarehouseUnavailable = {
  readonly kind: 'unavailable';
  readonly status?: number;
  readonly retryAfterSeconds?: number;
};

export type BookingOutcome = { readonly kind: 'booked'; readonly shipment: Shipment } | WarehouseUnavailable;

export type ShipmentLookup =
  | { readonly kind: 'found'; readonly shipment: Shipment }
  | { readonly kind: 'none' }
  | WarehouseUnavailable;

export interface WarehouseClientOptions {
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly fetch?: typeof fetch;
}

export class WarehouseClient {
  private readonly fetch: typeof fetch;

  constructor(private readonly options: WarehouseClientOptions) {
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  /** Books a shipment: a new one on every call, so only ever call it once the lookup found none. */
  async book(reference: string, items: Shipment['items']): Promise<BookingOutcome> {
    const answer = await this.request('/v1/shipments', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ reference, items }),
    });
    if (answer.kind === 'unavailable') return answer;
    return { kind: 'booked', shipment: answer.body as Shipment };
  }

  /** The first shipment booked for `reference`, if any: the answer to "did my lost booking happen?". */
  async find(reference: string): Promise<ShipmentLookup> {
    const answer = await this.request(`/v1/shipments?reference=${encodeURIComponent(reference)}`, { method: 'GET' });
    if (answer.kind === 'unavailable') return answer;
    const shipment = (answer.body as { data?: Shipment[] }).data?.[0];
    return shipment ? { kind: 'found', shipment } : { kind: 'none' };
  }

  private async request(
    path: string,
    init: RequestInit,
  ): Promise<{ readonly kind: 'ok'; readonly body: unknown } | WarehouseUnavailable> {
    let response: Response;
    try {
      response = await this.fetch(new URL(path, this.options.baseUrl), {
        ...init,
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
    } catch {
      return { kind: 'unavailable' };
    }
    if (!response.ok) {
      const retryAfter = Number(response.headers.get('retry-after'));
      return {
        kind: 'unavailable',
        status: response.status,
        ...(Number.isFinite(retryAfter) && retryAfter > 0 ? { retryAfterSeconds: retryAfter } : {}),
      };
    }
    try {
      return { kind: 'ok', body: await response.json() };
    } catch {
      return { kind: 'unavailable', status: response.status };
    }
  }
}
