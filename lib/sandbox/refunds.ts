import { z } from 'zod';
import type { StoredResponse } from './attempt';
import type { Charge } from './charges';
import { ErrorType, invalidBody, SandboxApiError } from './errors';
import { newId } from './ids';

/** Unknown fields are refused, as the charge endpoint refuses them. */
const refundRequestSchema = z.strictObject({
  charge: z.string().min(1).max(255),
  /** In the charge's smallest unit; absent, what is left of the charge. */
  amount: z.number().int().min(1).optional(),
  metadata: z.record(z.string(), z.string()).optional(),
});

/** A validated `POST /v1/refunds` body. */
export type RefundRequest = z.infer<typeof refundRequestSchema>;

/** Money given back on a charge: the witness that a refund happened. */
export interface Refund {
  readonly id: string;
  readonly object: 'refund';
  readonly charge: string;
  /** In the charge's currency's smallest unit. */
  readonly amount: number;
  readonly currency: string;
  readonly status: 'succeeded';
  readonly metadata: Readonly<Record<string, string>>;
  /** The `Idempotency-Key` the refund was made under. */
  readonly idempotency_key: string;
  /** Unix seconds. */
  readonly created: number;
}

/** Validates a refund request body (already parsed from JSON). */
export function parseRefundRequest(body: unknown): RefundRequest {
  const parsed = refundRequestSchema.safeParse(body);
  if (!parsed.success) throw invalidBody('refund', parsed.error);
  return parsed.data;
}

/** A refund to make, or the answer that refuses it. */
export type RefundDecision =
  | { readonly kind: 'refund'; readonly refund: Refund }
  | { readonly kind: 'refused'; readonly response: StoredResponse };

/**
 * What a refund request does to the charges as they stand: a new refund, or Stripe's 400 for a charge it does not know,
 * a charge refunded in full already, or more than is left of it. Decided where the work is done, under the key's claim,
 * so two refunds of one charge under two keys can never give back more than it took.
 */
export function decideRefund(
  request: RefundRequest,
  charges: readonly Charge[],
  refunds: readonly Refund[],
  idempotencyKey: string,
  createdSeconds: number,
): RefundDecision {
  const charge = charges.find((candidate) => candidate.id === request.charge);
  if (!charge) {
    return refusal(`No such charge: '${request.charge}'`, 'resource_missing', 'charge');
  }
  const refunded = refunds.filter((given) => given.charge === charge.id).reduce((sum, given) => sum + given.amount, 0);
  const left = charge.amount - refunded;
  if (left === 0) return refusal(`Charge ${charge.id} has already been refunded.`, 'charge_already_refunded');
  const amount = request.amount ?? left;
  if (amount > left) {
    return refusal(
      `Refund amount (${amount}) is greater than the unrefunded amount on charge ${charge.id} (${left}).`,
      'amount_too_large',
      'amount',
    );
  }
  const refund: Refund = {
    id: newId('re'),
    object: 'refund',
    charge: charge.id,
    amount,
    currency: charge.currency,
    status: 'succeeded',
    metadata: request.metadata ?? {},
    idempotency_key: idempotencyKey,
    created: createdSeconds,
  };
  return { kind: 'refund', refund };
}

function refusal(message: string, code: string, param?: string): RefundDecision {
  const error = new SandboxApiError(400, ErrorType.invalidRequest, message, code, param);
  return { kind: 'refused', response: { status: 400, body: error.toBody() } };
}
