import type { SQSRecord } from 'aws-lambda';
import type { Clock } from 'keystone-idempotency/engine';
import { DeadLetterError, RetryLaterError, type SqsRecordContext } from 'keystone-idempotency/sqs';
import { RecoveryMetric } from '../metrics/definitions';
import { type ChargeCompletion, completeFromCharge, type PaymentRecoveryDeps } from '../payments/recovery';
import type { PaymentsRepository } from '../payments/store';
import { SETTLEMENT_SHORT_RETRIES } from '../timing/timing';
import { ChargeSucceededEvent } from './event';
import type { MailerClient } from './mailer-client';

export interface SettleDeps<TEffect> {
  readonly payments: PaymentsRepository<TEffect>;
  readonly mailer: MailerClient;
  readonly clock: Clock;
  /** For a charge whose payment isn't recorded: the idempotency store its operation lives in. */
  readonly recovery: PaymentRecoveryDeps<TEffect>;
  /** Counts payments this settlement completed for a client that never came back. */
  readonly metrics?: { addMetric(name: string, unit: 'Count', value: number): void };
  /**
   * How long to watch for the payment in-process while the request that charged still runs (it usually commits
   * within a second of the charge), before sending the event back to the queue. Default 2000; 0 never waits.
   */
  readonly ownerWaitMs?: number;
}

const DEFAULT_OWNER_WAIT_MS = 2000;
/** The first look again after 100 ms (most owners commit within a few), then less often, at most every 500 ms. */
const OWNER_POLL_MS = { first: 100, growth: 1.5, max: 500 } as const;

export interface SettleSummary {
  readonly payment_id: string;
  /** True when this event settled the payment; false when it was settled already (no receipt sent again). */
  readonly settled: boolean;
  /** The receipt's id, or null when none was sent by this event. */
  readonly receipt: string | null;
}

/**
 * Settles the payment a `charge.succeeded` event names and sends its receipt: once per payment, whatever the
 * events.
 *
 * ```
 * event ──► payment row? ──no──► complete the operation from the charge (recovery)
 *              │                   owner still live / lost a race ──► RetryLater: 1 s, 2 s, then the owner's lease
 *              │                   taken over, or record gone ──► payment row + stored 201 committed
 *              ▼
 *           row's charge ≠ event's charge ──► DeadLetter: never applied, nothing emailed
 *           already settled ──► done: its receipt went out before it settled
 *           receipt (keyed by payment) ──► compare-and-set succeeded → settled, committed with the event's key
 * ```
 *
 * The receipt goes out under a key derived from the payment, not the event: two distinct events for one payment,
 * even at once, reach the mailer under one key and send one email.
 */
export function settleFromEvent<TEffect>(deps: SettleDeps<TEffect>) {
  return async function settle(record: SQSRecord, context: SqsRecordContext<TEffect>): Promise<SettleSummary> {
    const event = ChargeSucceededEvent.parse(JSON.parse(record.body));
    const charge = event.data.object;
    const { payment_id: paymentId, account_id: accountId } = charge.metadata;
    let payment = await deps.payments.getPayment(accountId, paymentId);
    if (!payment) {
      const completion = await completeFromCharge(deps.recovery, charge);
      if (completion.kind === 'completed') deps.metrics?.addMetric(RecoveryMetric.completedWithoutClient, 'Count', 1);
      if (completion.kind === 'owner-live') {
        const remaining = context.lambdaContext?.getRemainingTimeInMillis?.() ?? Number.POSITIVE_INFINITY;
        const budget = Math.min(deps.ownerWaitMs ?? DEFAULT_OWNER_WAIT_MS, completion.retryAfterMs, remaining / 2);
        payment = await watchFor(() => deps.payments.getPayment(accountId, paymentId), budget);
      } else {
        const wait = waitFor(completion, context.receiveCount);
        if (wait !== undefined) throw new RetryLaterError(`payment ${paymentId}: ${wait.reason}`, wait.afterMs);
        payment = await deps.payments.getPayment(accountId, paymentId);
      }
      if (!payment) {
        const wait = waitFor(completion, context.receiveCount) ?? { afterMs: 1000, reason: 'not readable yet' };
        throw new RetryLaterError(`payment ${paymentId}: ${wait.reason}`, wait.afterMs);
      }
    }
    if (payment.charge_id !== charge.id) {
      throw new DeadLetterError(
        `event ${event.id} names charge ${charge.id}, but payment ${paymentId} was made by charge ` +
          `${payment.charge_id}: not applied, no receipt sent`,
      );
    }
    // Settled already (by an earlier delivery, or another event for this charge): its receipt went out first.
    if (payment.status === 'settled') return { payment_id: paymentId, settled: false, receipt: null };

    const email = await deps.mailer.send(
      {
        to: `receipts+${accountId}@example.test`,
        subject: `Receipt for payment ${paymentId}`,
        text: `We received ${formatAmount(charge.amount, charge.currency)} (charge ${charge.id}). Thank you.`,
        metadata: { payment_id: paymentId },
      },
      receiptKey(paymentId),
    );
    context.stage(deps.payments.settlePayment(accountId, paymentId, new Date(deps.clock.now()).toISOString()));
    return { payment_id: paymentId, settled: true, receipt: email.id };
  };
}

/** The mailer's idempotency key for a payment's receipt: one receipt per payment, whichever event sends it. */
export function receiptKey(paymentId: string): string {
  return `receipt_${paymentId}`;
}

/**
 * How long an event waits for the payment it names. The processor sends it right after charging, usually just
 * before our commit lands: come back in 1 s, then 2 s ({@link SETTLEMENT_SHORT_RETRIES}). From the next try wait out
 * what is left of the owner's lease: by then the owner has committed, or it is gone and its operation can be taken
 * over and completed here. The timing check makes the queue's receive count fit this schedule.
 */
export function waitFor(
  completion: ChargeCompletion,
  receiveCount: number,
): { afterMs: number; reason: string } | undefined {
  const backoff = 1000 * 2 ** Math.min(Math.max(receiveCount, 1) - 1, 4);
  switch (completion.kind) {
    case 'completed':
    case 'already-completed':
    case 'recorded-without-operation':
      return undefined;
    case 'owner-live':
      return {
        afterMs: receiveCount <= SETTLEMENT_SHORT_RETRIES ? backoff : Math.max(backoff, completion.retryAfterMs + 1000),
        reason: 'the request that charged is still running',
      };
    case 'contended':
      return { afterMs: 1000, reason: 'another owner took the operation first' };
    case 'untracked':
      return { afterMs: backoff, reason: 'not recorded yet, and the charge names no operation to complete' };
  }
}

/** Reads until something is there or the budget is spent: a live owner usually commits within a second. */
async function watchFor<T>(read: () => Promise<T | undefined>, budgetMs: number): Promise<T | undefined> {
  const deadline = Date.now() + budgetMs;
  // Backing off matters under a burst: every early event watching at a fixed short interval would load the very
  // table the owners are committing to.
  for (let pause: number = OWNER_POLL_MS.first; ; pause = Math.min(pause * OWNER_POLL_MS.growth, OWNER_POLL_MS.max)) {
    const found = await read();
    if (found !== undefined || Date.now() + pause > deadline) return found;
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

function formatAmount(amount: number, currency: string): string {
  try {
    const format = new Intl.NumberFormat('en', { style: 'currency', currency });
    const digits = format.resolvedOptions().maximumFractionDigits ?? 2;
    return format.format(amount / 10 ** digits);
  } catch {
    return `${amount} ${currency}`;
  }
}
