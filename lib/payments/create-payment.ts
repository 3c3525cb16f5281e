import type { APIGatewayProxyResult } from 'aws-lambda';
import type { IdempotencyHandle } from 'keystone-idempotency/engine';
import { problemResponse } from 'keystone-idempotency/http';
import { chargeReference, paymentCreated, paymentFromCharge } from './payment';
// The problem types from their own module: problems.ts builds zod schemas (for the OpenAPI document) at import.
import { PaymentProblemType, PROBLEM_TYPE_BASE } from './problem-types';
import type { CardDeclinedProblem, PaymentRejectedProblem } from './problems';
import type { ProcessorClient } from './processor-client';
import type { PaymentRequest } from './schema';
import type { PaymentsRepository } from './store';

export interface CreatePaymentDeps<TEffect> {
  readonly processor: ProcessorClient;
  readonly payments: PaymentsRepository<TEffect>;
}

/**
 * Charges through the processor under the operation's downstream key, then stages the payment row so it commits
 * with the key's completion. A decline is a stored answer (402); an outage is not (5xx + Retry-After releases the
 * key, and the retry reaches the processor under the same downstream key, finding any charge already made).
 *
 * The charge carries a reference to this operation (its payment id, account, stored key and downstream key): if the
 * client never comes back, whoever sees the charge next (its webhook, the completer) finishes the same payment with
 * the same {@link paymentFromCharge}, so the row and the stored 201 are the ones this handler would have written.
 */
export async function createPayment<TEffect>(
  deps: CreatePaymentDeps<TEffect>,
  input: { accountId: string; body: PaymentRequest; idempotency: IdempotencyHandle<TEffect> },
): Promise<APIGatewayProxyResult> {
  const { accountId, body, idempotency } = input;
  const reference = chargeReference(accountId, idempotency.key, idempotency.downstreamKey);
  const outcome = await deps.processor.charge(
    {
      amount: body.amount,
      currency: body.currency,
      source: body.source,
      ...(body.description !== undefined ? { description: body.description } : {}),
      metadata: { ...reference },
    },
    idempotency.downstreamKey,
  );
  switch (outcome.kind) {
    case 'charged': {
      const payment = paymentFromCharge(outcome.charge, reference.payment_id);
      idempotency.stage(deps.payments.putPayment(accountId, payment, idempotency.downstreamKey));
      return paymentCreated(payment);
    }
    case 'declined': {
      const problem: CardDeclinedProblem = {
        type: PaymentProblemType.cardDeclined,
        title: 'Card declined',
        status: 402,
        detail: outcome.message,
        decline_code: outcome.code,
      };
      return problemResponse(problem, {}, PROBLEM_TYPE_BASE);
    }
    case 'unavailable':
      return unavailable(outcome.reason, outcome.retryAfterSeconds);
    case 'rejected': {
      // A value the client chose (the processor names it) is the client's mistake, and theirs to fix: a 422 that
      // says which field. Anything else the processor refuses (our metadata, our key reused) is a bug of ours: a 500.
      if (outcome.param !== undefined && CLIENT_FIELDS.has(outcome.param.split('.')[0] ?? '')) {
        const problem: PaymentRejectedProblem = {
          type: PaymentProblemType.paymentRejected,
          title: 'Payment rejected by the processor',
          status: 422,
          detail: 'The payment processor refused a value of this request. Fix it and send a new request.',
          errors: [{ path: outcome.param, message: outcome.message }],
        };
        return problemResponse(problem, {}, PROBLEM_TYPE_BASE);
      }
      throw new Error(`processor rejected the charge (${outcome.status}): ${outcome.message}`);
    }
  }
}

/** The fields of POST /payments that reach the processor as the client sent them. */
const CLIENT_FIELDS: ReadonlySet<string> = new Set(['amount', 'currency', 'source', 'description']);

const UNAVAILABLE = {
  timeout: { status: 504, title: 'Payment processor timed out' },
  network: { status: 502, title: 'Payment processor unreachable' },
  server_error: { status: 502, title: 'Payment processor error' },
  overloaded: { status: 503, title: 'Payment processor unavailable' },
} as const;

function unavailable(reason: keyof typeof UNAVAILABLE, retryAfterSeconds = 1): APIGatewayProxyResult {
  const { status, title } = UNAVAILABLE[reason];
  return problemResponse(
    {
      type: PaymentProblemType.processorUnavailable,
      title,
      status,
      // Not "the payment failed": the processor may have charged before the answer was lost. A retry finds out.
      detail:
        'The payment processor did not answer: the payment may or may not have been made. Retry with the same ' +
        'Idempotency-Key: it will not be charged twice, and if it was made the retry returns it.',
    },
    { 'Retry-After': String(retryAfterSeconds) },
    PROBLEM_TYPE_BASE,
  );
}
