import {
  type Fetch,
  type Operation,
  type OperationResult,
  type RetryPolicy,
  RetrySafeClient,
} from 'keystone-idempotency/client';
import * as z from 'zod/mini';
import type { PaymentRequest } from '../payment-schema';
import { Payment } from '../payment-schema';

/** `POST /payments` body, as the API's schema defines it. */
export type NewPayment = PaymentRequest;
export type { Payment };

/** One payment, prepared: its key fixed, its body taken. */
export type PaymentOperation = Operation<Payment, NewPayment>;
/** How one `send()` of a payment ended: on success, `body` is the payment. */
export type PaymentResult = OperationResult<Payment>;

export interface PaymentsClientOptions {
  /** Where the API is: `http://127.0.0.1:3000`, or a deployed stage's URL (its path is kept). */
  readonly baseUrl: string | URL;
  /** The account's API key, sent as `Authorization: Bearer <key>`. */
  readonly apiKey: string;
  /** Overrides of the retry-safe client's default policy. */
  readonly retry?: Partial<RetryPolicy>;
  /** Default: the global `fetch`. */
  readonly fetch?: Fetch;
  /** Epoch milliseconds, for the attempt history. Default `Date.now`. */
  readonly now?: () => number;
  /** A value in [0, 1) for the backoff's jitter. Default `Math.random`. */
  readonly random?: () => number;
}

/**
 * A payment as the API documents it, by the same schema the handlers answer with; a field added to it later is
 * dropped rather than refused, so a newer server does not break an older page.
 */
const PaymentAnswer = z.object(Payment.shape);

/**
 * The payments API's client: the retry-safe client (`keystone-idempotency/client`) pointed at `POST /payments`, with
 * the account's API key, and a 201 read as a {@link Payment} (anything else, `null` included, is an
 * `invalid-response`). Runs in browsers (the double-tap demo bundles it) and in Node >= 20.
 *
 * @example
 * const client = new PaymentsClient({ baseUrl: 'http://127.0.0.1:3000', apiKey });
 * const payment = client.preparePayment({ amount: 4200, currency: 'usd', source: 'tok_visa' });
 * localStorage.setItem('checkout', JSON.stringify({ key: payment.idempotencyKey, body: payment.body })); // first
 * const result = await payment.send();
 * if (result.kind === 'success') show(result.body);
 */
export class PaymentsClient {
  readonly #client: RetrySafeClient;

  constructor(options: PaymentsClientOptions) {
    if (!options.apiKey) throw new TypeError('PaymentsClient: apiKey is required');
    this.#client = new RetrySafeClient({
      baseUrl: options.baseUrl,
      headers: { Authorization: `Bearer ${options.apiKey}` },
      retry: options.retry,
      fetch: options.fetch,
      now: options.now,
      random: options.random,
    });
  }

  /**
   * One payment, not yet sent, with its key fixed: the caller's own (an order id it already stored, say), or a new
   * random one. Persist `idempotencyKey` (and the body) before calling `send()`: after a reload or a crash,
   * `preparePayment(body, { idempotencyKey })` with the stored key continues the same operation.
   */
  preparePayment(body: NewPayment, options: { readonly idempotencyKey?: string } = {}): PaymentOperation {
    return this.#client.prepare({
      url: 'payments',
      body,
      idempotencyKey: options.idempotencyKey,
      parse: readPayment,
    });
  }
}

/** The payment in a 2xx body; throws, naming each field that is wrong, for anything else. */
export function readPayment(body: unknown): Payment {
  const parsed = PaymentAnswer.safeParse(body);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((issue) => {
    const where = issue.path.length === 0 ? 'the body' : issue.path.join('.');
    const expected = issue.code === 'invalid_type' ? ` (expected ${issue.expected})` : '';
    return `${where}: ${issue.message}${expected}`;
  });
  throw new TypeError(`not a payment: ${issues.join('; ')}`);
}
