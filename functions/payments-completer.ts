import { Logger } from '@aws-lambda-powertools/logger';
import middy from '@middy/core';
import type { Context, ScheduledEvent } from 'aws-lambda';
import type { RecoveryReport } from 'keystone-idempotency/engine';
import { MetricService, RecoveryMetric } from '../lib/metrics/definitions';
import { idempotencyStore, paymentsStore, processorClient } from '../lib/payments/config';
import { recoverPayments } from '../lib/payments/recovery';
import { documentClient } from '../lib/runtime/clients';
import { numberEnv } from '../lib/runtime/env';
import { publishMetrics, serviceMetrics } from '../lib/runtime/metrics';
import { tracing } from '../lib/runtime/tracing';

/**
 * The completer, on a schedule: the backstop for payments whose client never came back and whose processor event
 * never arrived. Each unfinished payment operation past its lease is taken over (fenced), the processor is asked
 * what it charged under the operation's downstream key, and the payment is completed from that charge or the
 * operation abandoned. Nothing is ever charged by this function: it only looks.
 */
const logger = new Logger({ serviceName: 'payments-completer' });
const metrics = serviceMetrics(MetricService.recovery);
const deps = { store: idempotencyStore(), payments: paymentsStore(), processor: processorClient() };
/**
 * Stop taking operations once one more might not finish its processor lookup. A run cut short is harmless (the
 * operation it held stays due, and comes back once recovery's own lease runs out), so the margin is only a courtesy.
 */
const marginMs = numberEnv('PROCESSOR_TIMEOUT_MS', 8000) + 250;

async function completeAbandonedPayments(_event: ScheduledEvent, context: Context): Promise<RecoveryReport> {
  const report = await recoverPayments(deps, {
    limit: 100,
    shouldStop: () => context.getRemainingTimeInMillis() < marginMs,
    logger,
  });
  if (report.completed > 0) metrics.addMetric(RecoveryMetric.completedWithoutClient, 'Count', report.completed);
  if (report.abandoned > 0) metrics.addMetric(RecoveryMetric.abandoned, 'Count', report.abandoned);
  if (report.due > 0) logger.info('recovery run', { ...report });
  return report;
}

export const handler = middy<ScheduledEvent, RecoveryReport>(completeAbandonedPayments)
  .use(tracing('payments-completer', [documentClient()]))
  .use(publishMetrics(metrics));
