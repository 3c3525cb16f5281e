import type { SQSRecord } from 'aws-lambda';
import type { Clock } from '../engine/clock';
import type { PaymentsStore } from '../payments/store';
import type { SqsRecordContext } from '../sqs/record-context';
import { ChargeSucceededEvent } from './event';
import type { MailerClient } from './mailer-client';

export interface SettleDeps {
  readonly payments: PaymentsStore;
  readonly mailer: MailerClient;
  readonly clock: Clock;
}

export interface SettleSummary {
  readonly payment_id: string;
  readonly settled: boolean;
  readonly email_id: string;
}

/** Thrown when the payment the event names isn't committed yet: the record goes back to the queue for later. */
export class PaymentNotYetRecordedError extends Error {
  constructor(paymentId: string) {
    super(`payment ${paymentId} is not recorded yet`);
    this.name = 'PaymentNotYetRecordedError';
  }
}

/**
 * Settles the payment a `charge.succeeded` event names and sends its receipt, once per event.
 *
 * The processor sends the event right after charging, which can be before our payment row commits: a missing
 * payment goes back to the queue and is found on redelivery (or, if the payment never commits, the event ends in
 * the DLQ for a person to look at). The settlement is staged, so it commits with the event's key; the receipt goes
 * out under the record's downstream key, so a retry after a crash finds the email already sent instead of sending
 * a second one.
 */
export function settleFromEvent(deps: SettleDeps) {
  return async function settle(record: SQSRecord, context: SqsRecordContext): Promise<SettleSummary> {
    const event = ChargeSucceededEvent.parse(JSON.parse(record.body));
    const charge = event.data.object;
    const { payment_id: paymentId, account_id: accountId } = charge.metadata;
    const payment = await deps.payments.getPayment(accountId, paymentId);
    if (!payment) throw new PaymentNotYetRecordedError(paymentId);

    const email = await deps.mailer.send(
      {
        to: `receipts+${accountId}@example.test`,
        subject: `Receipt for payment ${paymentId}`,
        text: `We received ${formatAmount(charge.amount, charge.currency)} (charge ${charge.id}). Thank you.`,
        metadata: { payment_id: paymentId, event_id: event.id },
      },
      context.downstreamKey,
    );
    // Already settled (by this event's earlier owner whose commit we can't see, or by another event for the same
    // charge): nothing to change, and staging the compare-and-set would only fail the commit.
    if (payment.status === 'succeeded') {
      context.stage(deps.payments.settlePayment(accountId, paymentId, new Date(deps.clock.now()).toISOString()));
    }
    return { payment_id: paymentId, settled: payment.status === 'succeeded', email_id: email.id };
  };
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
