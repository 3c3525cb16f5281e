import { z } from 'zod';
import type { ErrorBody } from './errors';
import { ErrorType, invalidBody, SandboxApiError } from './errors';
import { newId } from './ids';

/** The test token that always declines, as Stripe's `tok_chargeDeclined` does. */
export const DECLINING_SOURCE = 'tok_chargeDeclined';

/** The test tokens the sandbox knows, as Stripe's: a `tok_` value outside these is refused as "No such token". */
export const KNOWN_TOKENS: ReadonlySet<string> = new Set([
  'tok_visa',
  'tok_visa_debit',
  'tok_mastercard',
  'tok_amex',
  DECLINING_SOURCE,
]);

/** Stripe's ceiling for a single amount in the smallest currency unit. */
const MAX_AMOUNT = 99_999_999;

/** Unknown fields are refused, as a real processor refuses unknown parameters: a typo must not pass silently. */
const chargeRequestSchema = z.strictObject({
  amount: z.number().int().min(1).max(MAX_AMOUNT),
  currency: z.string().regex(/^[A-Za-z]{3}$/, 'expected a three-letter ISO currency code'),
  source: z.string().min(1),
  description: z.string().max(1000).optional(),
  metadata: z.record(z.string(), z.string()).optional(),
});

/** A validated `POST /v1/charges` body. */
export type ChargeRequest = z.infer<typeof chargeRequestSchema>;

/** A successful charge: the witness that money moved. */
export interface Charge {
  readonly id: string;
  readonly object: 'charge';
  /** In the currency's smallest unit (cents). */
  readonly amount: number;
  /** Lowercase ISO code, as the processor returns it whatever case was sent. */
  readonly currency: string;
  readonly source: string;
  /** As sent, or null (Stripe's convention for an absent description). */
  readonly description: string | null;
  readonly status: 'succeeded';
  readonly metadata: Readonly<Record<string, string>>;
  /** The `Idempotency-Key` the charge was made under: how a test ties a charge to the request that made it. */
  readonly idempotency_key: string;
  /** Unix seconds. */
  readonly created: number;
}

/**
 * Validates a charge request body (already parsed from JSON). An unknown test token is refused the way Stripe
 * refuses one: a 400 `invalid_request_error`, code `resource_missing`, naming the `source` parameter.
 */
export function parseChargeRequest(body: unknown): ChargeRequest {
  const parsed = chargeRequestSchema.safeParse(body);
  if (!parsed.success) throw invalidBody('charge', parsed.error);
  const { source } = parsed.data;
  if (source.startsWith('tok_') && !KNOWN_TOKENS.has(source)) {
    throw new SandboxApiError(
      400,
      ErrorType.invalidRequest,
      `No such token: '${source}'`,
      'resource_missing',
      'source',
    );
  }
  return parsed.data;
}

/** Whether the processor will decline this charge. */
export function isDeclined(request: ChargeRequest): boolean {
  return request.source === DECLINING_SOURCE;
}

/** The charge a successful request creates. */
export function buildCharge(request: ChargeRequest, idempotencyKey: string, createdSeconds: number): Charge {
  return {
    id: newId('ch'),
    object: 'charge',
    amount: request.amount,
    currency: request.currency.toLowerCase(),
    source: request.source,
    description: request.description ?? null,
    status: 'succeeded',
    metadata: request.metadata ?? {},
    idempotency_key: idempotencyKey,
    created: createdSeconds,
  };
}

/** The 402 body of a declined card, in Stripe's shape. */
export function declineBody(): ErrorBody {
  return { error: { type: ErrorType.card, code: 'card_declined', message: 'Your card was declined.' } };
}
