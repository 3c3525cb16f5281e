import { Logger } from '@aws-lambda-powertools/logger';
import middy from '@middy/core';
import { systemClock } from '../lib/engine/clock';
import { idempotencyStore, paymentsStore } from '../lib/payments/config';
import { documentClient } from '../lib/runtime/clients';
import { tracing } from '../lib/runtime/tracing';
import { mailerClient } from '../lib/settlement/config';
import { settleFromEvent } from '../lib/settlement/settle';
import { makeSqsIdempotentHandler } from '../lib/sqs/handler';
import { byBodyField } from '../lib/sqs/record-key';

/**
 * The settlement queue's consumer: one settlement and one receipt per processor event, however often the event is
 * delivered (webhook resends, SQS redeliveries, the same event enqueued twice). Failures go back to the queue as
 * partial batch failures; a message that keeps failing ends in the DLQ.
 */
const logger = new Logger({ serviceName: 'settlement' });

const settle = makeSqsIdempotentHandler({
  store: idempotencyStore(),
  name: 'settlement',
  key: byBodyField('id'),
  process: settleFromEvent({ payments: paymentsStore(), mailer: mailerClient(), clock: systemClock }),
  logger,
});

export const handler = middy(settle).use(tracing('settlement', [documentClient()]));
