import { Logger } from '@aws-lambda-powertools/logger';
import middy from '@middy/core';
import type { Context, ScheduledEvent } from 'aws-lambda';
import { type RecoveryReport, StepMetric, type StepOutcome, systemClock } from 'keystone-idempotency/engine';
import { MetricService, RecoveryBacklogMetric, RecoveryMetric } from '../lib/metrics/definitions';
import { orderMailerClient, warehouseClient } from '../lib/orders/config';
import { ORDER_OPERATION, orderRecovery } from '../lib/orders/recovery';
import { processorClient, serviceData } from '../lib/payments/config';
import { recoverPayments } from '../lib/payments/recovery';
import { withInvocationDeadline } from '../lib/runtime/deadline';
import { numberEnv } from '../lib/runtime/env';
import { publishMetrics, serviceMetrics } from '../lib/runtime/metrics';
import { tracing } from '../lib/runtime/tracing';
import {
  COMPLETER_CONCURRENCY,
  COMPLETER_PAGE_SIZE,
  COMPLETER_STOP_MARGIN_MS,
  DEFAULT_CALL_TIMEOUTS_MS,
} from '../lib/timing/timing';

/**
 * The completer, on a schedule: the backstop for payments whose client never came back and whose processor event
 * never arrived. Each unfinished payment operation past its lease is taken over (fenced), the processor is asked
 * what it charged under the operation's downstream key, and the payment is completed from that charge or the
 * operation abandoned. Nothing is ever charged by this function: it only looks.
 *
 * A run drains everything due, page after page, until its time is up; what it could not reach waits for the next
 * run (an unfinished operation never expires, so a backlog costs time, never money). Each run publishes how long
 * the oldest operation it left due has been waiting: the alarm on it says the completer is falling behind.
 */
const logger = new Logger({ serviceName: 'payments-completer' });
const metrics = serviceMetrics(MetricService.recovery);
const data = serviceData();
const processor = processorClient();
const deps = { store: data.store, payments: data.payments, processor };
// Orders whose client never came back are driven forward from their last recovery point, step by step.
const orders = orderRecovery({
  orders: data.orders,
  processor,
  warehouse: warehouseClient(),
  mailer: orderMailerClient(),
  clock: systemClock,
});
/**
 * Stop taking operations once one more might not finish its processor lookup. A run cut short is harmless (the
 * operation it held stays due, and comes back once recovery's own lease runs out), so the margin is only a courtesy.
 */
const marginMs = numberEnv('PROCESSOR_TIMEOUT_MS', DEFAULT_CALL_TIMEOUTS_MS.processor) + COMPLETER_STOP_MARGIN_MS;

async function completeAbandonedPayments(_event: ScheduledEvent, context: Context): Promise<RecoveryReport> {
  const startedAt = Date.now();
  const report = await recoverPayments(
    deps,
    {
      limit: COMPLETER_PAGE_SIZE,
      concurrency: COMPLETER_CONCURRENCY,
      shouldStop: () => context.getRemainingTimeInMillis() < marginMs,
      logger,
    },
    { [ORDER_OPERATION]: orders },
  );
  if (report.completed > 0) metrics.addMetric(RecoveryMetric.completedWithoutClient, 'Count', report.completed);
  if (report.abandoned > 0) metrics.addMetric(RecoveryMetric.abandoned, 'Count', report.abandoned);
  if (report.compensated > 0) metrics.addMetric(RecoveryMetric.compensated, 'Count', report.compensated);
  if (report.abandonedWithProgress > 0) {
    metrics.addMetric(RecoveryMetric.abandonedWithProgress, 'Count', report.abandonedWithProgress);
  }
  if (report.compensationFailed > 0) {
    metrics.addMetric(RecoveryMetric.compensationFailed, 'Count', report.compensationFailed);
  }
  if (report.compensationStuck > 0)
    metrics.addMetric(RecoveryMetric.compensationStuck, 'Count', report.compensationStuck);
  // What each step of the operations driven forward did (ran, found by its resolver, refused, ...).
  for (const [outcome, count] of Object.entries(report.steps)) {
    if (count) metrics.addMetric(StepMetric[outcome as StepOutcome], 'Count', count);
  }
  // From when it was first due, not from `recoverAt`: a retry moves that, and a charge retried forever would look new.
  const waitedMs = report.oldestDue ? Math.max(0, Date.now() - report.oldestDue.firstDueAt) : 0;
  metrics.addMetric(RecoveryBacklogMetric.oldestDueAge, 'Seconds', Math.round(waitedMs / 1000));
  // Expired records go in batches where the database keeps them (PostgreSQL); DynamoDB's TTL deletes its own.
  const purged = context.getRemainingTimeInMillis() > marginMs ? await data.purgeExpired() : 0;
  if (report.due > 0 || report.oldestDue || purged > 0) {
    logger.info('recovery run', { ...report, purged, oldestDueWaitedMs: waitedMs, durationMs: Date.now() - startedAt });
  }
  return report;
}

export const handler = withInvocationDeadline(
  middy<ScheduledEvent, RecoveryReport>(completeAbandonedPayments)
    .use(tracing('payments-completer', data.tracedClients))
    .use(publishMetrics(metrics)),
);
