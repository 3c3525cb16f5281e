import { Logger } from '@aws-lambda-powertools/logger';
import middy from '@middy/core';
import { systemClock } from 'keystone-idempotency/engine';
import { byBodyField, makeSqsIdempotentHandler } from 'keystone-idempotency/sqs';
import { MetricService } from '../lib/metrics/definitions';
import { serviceData } from '../lib/payments/config';
import { withInvocationDeadline } from '../lib/runtime/deadline';
import { publishMetrics, serviceMetrics } from '../lib/runtime/metrics';
import { tracing } from '../lib/runtime/tracing';
import { mailerClient, settlementDeadLetterUrl, settlementQueueUrl, sqsClient } from '../lib/settlement/config';
import { settleFromEvent } from '../lib/settlement/settle';

/**
 * The settlement queue's consumer: one settlement and one receipt per payment, however often and in whatever order
 * its events arrive. An event that names a payment not yet recorded completes it from the charge when its client is
 * gone, or comes back in seconds while the request that charged is still running; one that contradicts the payment
 * goes to the DLQ at once. Other failures go back to the queue as partial batch failures.
 */
const logger = new Logger({ serviceName: 'settlement' });
// Recovery has its own service dimension: settlement and the completer count into the same metrics.
const metrics = serviceMetrics(MetricService.recovery);
const data = serviceData();
const { payments, store } = data;

const settle = makeSqsIdempotentHandler({
  store,
  name: 'settlement',
  key: byBodyField('id'),
  process: settleFromEvent({
    payments,
    mailer: mailerClient(),
    clock: systemClock,
    recovery: { store, payments },
    metrics,
  }),
  queue: { client: sqsClient(), url: settlementQueueUrl(), deadLetterUrl: settlementDeadLetterUrl() },
  logger,
});

export const handler = withInvocationDeadline(
  middy(settle).use(tracing('settlement', data.tracedClients)).use(publishMetrics(metrics)),
);
