import { errorFields, laterOf, noAnswer, type Unavailable } from '../runtime/outside-answer';

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

/**
 * The processor refused the request itself. Not retryable. `param` names the parameter at fault when the processor
 * says (Stripe does): one the client chose (an unknown card token) is the client's mistake; anything else (the key
 * reused with another body, our metadata) is ours. `code` says why (`charge_already_refunded`, `resource_missing`...).
 */
export type ProcessorRejection = {
  readonly kind: 'rejected';
  readonly status: number;
  readonly message: string;
  readonly type?: string;
  readonly code?: string;
  readonly param?: string;
};

/** The outcome is unknown or the processor is down: safe to retry under the same key. */
export type ProcessorUnavailable = Unavailable;

export type ChargeOutcome =
  | { readonly kind: 'charged'; readonly charge: Charge }
  | { readonly kind: 'declined'; readonly code: string; readonly message: string }
  | ProcessorRejection
  | ProcessorUnavailable;

/** Money given back on a charge, as the processor reports it. */
export interface Refund {
  readonly id: string;
  readonly charge: string;
  readonly amount: number;
  readonly currency: string;
  readonly status: string;
  /** Unix seconds. */
  readonly created: number;
}

/**
 * A refund's outcome. `rejected` with `code: 'charge_already_refunded'` means the money is back already (refunded under
 * another key); `resource_missing`, that the processor knows no such charge.
 */
export type RefundOutcome =
  | { readonly kind: 'refunded'; readonly refund: Refund }
  | ProcessorRejection
  | ProcessorUnavailable;

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
    const answer = await this.post('/v1/charges', request, idempotencyKey);
    if (answer.kind === 'unavailable') return answer;
    if (answer.response.ok) return { kind: 'charged', charge: answer.body as Charge };
    if (answer.response.status === 402) {
      const { code, message } = errorFields(answer.body);
      return { kind: 'declined', code: code ?? 'card_declined', message: message ?? 'The card was declined.' };
    }
    return refusedOrUnavailable(answer.response, answer.body);
  }

  /**
   * Gives the whole of what is left of a charge back, under our key: a retry with the key replays the refund instead of
   * making a second one (and a refund of a charge refunded in full is `rejected`, `charge_already_refunded`).
   */
  async refund(chargeId: string, idempotencyKey: string): Promise<RefundOutcome> {
    const answer = await this.post('/v1/refunds', { charge: chargeId }, idempotencyKey);
    if (answer.kind === 'unavailable') return answer;
    if (answer.response.ok) return { kind: 'refunded', refund: answer.body as Refund };
    return refusedOrUnavailable(answer.response, answer.body);
  }

  /** A POST with our key, and its JSON answer: anything short of one is `unavailable` (it may or may not have happened). */
  private async post(
    path: string,
    body: unknown,
    idempotencyKey: string,
  ): Promise<
    { readonly kind: 'answered'; readonly response: Response; readonly body: unknown } | ProcessorUnavailable
  > {
    let response: Response;
    try {
      response = await this.fetch(new URL(path, this.options.baseUrl), {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          'Idempotency-Key': idempotencyKey,
          ...(this.options.apiKey ? { Authorization: `Bearer ${this.options.apiKey}` } : {}),
        },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
    } catch (error) {
      return noAnswer(error);
    }
    try {
      return { kind: 'answered', response, body: await response.json() };
    } catch {
      // A body cut short or not JSON: the work may or may not exist; only a retry under the same key can tell.
      return { kind: 'unavailable', reason: response.ok ? 'network' : 'server_error', status: response.status };
    }
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

/** A non-2xx answer other than a decline: "later" (see lib/runtime/outside-answer.ts), or a refusal. */
function refusedOrUnavailable(response: Response, body: unknown): ProcessorRejection | ProcessorUnavailable {
  const later = laterOf(response);
  if (later) return later;
  const { message, type, code, param } = errorFields(body);
  return {
    kind: 'rejected',
    status: response.status,
    message: message ?? `processor answered ${response.status}`,
    ...(type ? { type } : {}),
    ...(code ? { code } : {}),
    ...(param ? { param } : {}),
  };
}
