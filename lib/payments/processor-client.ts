/**
 * The payment processor, from our side of the wire. Every charge carries an Idempotency-Key of ours (the record's
 * downstream key), so a retry of the same operation finds the charge the processor already made instead of making
 * a second one. Outcomes are values: a decline is an answer, an outage is a reason to retry later.
 */
export interface ChargeRequest {
  readonly amount: number;
  readonly currency: string;
  readonly source: string;
  readonly description?: string;
  readonly metadata: Readonly<Record<string, string>>;
}

/** A charge as the processor reports it (in its answer, its webhook events and its lookup). */
export interface Charge {
  readonly id: string;
  readonly amount: number;
  readonly currency: string;
  readonly source: string;
  readonly description?: string | null;
  readonly status: string;
  /** Unix seconds. */
  readonly created: number;
  readonly metadata: Readonly<Record<string, string | undefined>>;
}

/**
 * What the processor knows under an idempotency key. `pending`: the first request with the key is still working,
 * so the outcome is not known yet; `unavailable`: the question could not be asked. Neither means "no charge".
 */
export type ChargeLookup =
  | { readonly kind: 'found'; readonly charge: Charge }
  | { readonly kind: 'none' }
  | { readonly kind: 'pending' }
  | { readonly kind: 'unavailable'; readonly status?: number };

export type ChargeOutcome =
  | { readonly kind: 'charged'; readonly charge: Charge }
  | { readonly kind: 'declined'; readonly code: string; readonly message: string }
  /**
   * The processor refused the request itself. Not retryable. `param` names the parameter at fault when the
   * processor says (Stripe does): one the client chose (an unknown card token) is the client's mistake; anything
   * else (the key reused with another body, our metadata) is ours.
   */
  | {
      readonly kind: 'rejected';
      readonly status: number;
      readonly message: string;
      readonly type?: string;
      readonly code?: string;
      readonly param?: string;
    }
  /** The outcome is unknown or the processor is down: safe to retry under the same key. */
  | {
      readonly kind: 'unavailable';
      readonly reason: 'timeout' | 'network' | 'server_error' | 'overloaded';
      readonly status?: number;
      readonly retryAfterSeconds?: number;
    };

export interface ProcessorClientOptions {
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly apiKey?: string;
  readonly fetch?: typeof fetch;
}

export class ProcessorClient {
  private readonly fetch: typeof fetch;

  constructor(private readonly options: ProcessorClientOptions) {
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  async charge(request: ChargeRequest, idempotencyKey: string): Promise<ChargeOutcome> {
    let response: Response;
    try {
      response = await this.fetch(new URL('/v1/charges', this.options.baseUrl), {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          'Idempotency-Key': idempotencyKey,
          ...(this.options.apiKey ? { Authorization: `Bearer ${this.options.apiKey}` } : {}),
        },
        body: JSON.stringify(request),
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
    } catch (error) {
      const timedOut = error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError');
      return { kind: 'unavailable', reason: timedOut ? 'timeout' : 'network' };
    }
    let body: unknown;
    try {
      body = await response.json();
    } catch {
      // A body cut short or not JSON: the charge may or may not exist; only a retry under the same key can tell.
      return { kind: 'unavailable', reason: response.ok ? 'network' : 'server_error', status: response.status };
    }
    if (response.ok) return { kind: 'charged', charge: body as Charge };
    const error = (body as { error?: { code?: string; message?: string; type?: string; param?: string } }).error ?? {};
    if (response.status === 402) {
      return {
        kind: 'declined',
        code: error.code ?? 'card_declined',
        message: error.message ?? 'The card was declined.',
      };
    }
    if (response.status === 429 || response.status === 503) {
      const retryAfter = Number(response.headers.get('retry-after'));
      return {
        kind: 'unavailable',
        reason: 'overloaded',
        status: response.status,
        ...(Number.isFinite(retryAfter) && retryAfter > 0 ? { retryAfterSeconds: retryAfter } : {}),
      };
    }
    if (response.status >= 500) return { kind: 'unavailable', reason: 'server_error', status: response.status };
    return {
      kind: 'rejected',
      status: response.status,
      message: error.message ?? `processor answered ${response.status}`,
      ...(error.type ? { type: error.type } : {}),
      ...(error.code ? { code: error.code } : {}),
      ...(error.param ? { param: error.param } : {}),
    };
  }

  /** The charge made under `idempotencyKey`, if any: for recovery, which has the key but not the request. */
  async findCharge(idempotencyKey: string): Promise<ChargeLookup> {
    const url = new URL('/v1/charges', this.options.baseUrl);
    url.searchParams.set('idempotency_key', idempotencyKey);
    let response: Response;
    try {
      response = await this.fetch(url, {
        headers: this.options.apiKey ? { Authorization: `Bearer ${this.options.apiKey}` } : {},
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
    } catch {
      return { kind: 'unavailable' };
    }
    if (response.status === 409) return { kind: 'pending' };
    if (!response.ok) return { kind: 'unavailable', status: response.status };
    try {
      const list = (await response.json()) as { data?: Charge[] };
      const charge = list.data?.[0];
      return charge ? { kind: 'found', charge } : { kind: 'none' };
    } catch {
      return { kind: 'unavailable', status: response.status };
    }
  }
}
