import { Logger } from '@aws-lambda-powertools/logger';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import middy from '@middy/core';
import type { APIGatewayProxyResult, Context } from 'aws-lambda';
import { systemClock } from 'keystone-idempotency/engine';
import {
  type HttpEvent,
  type HttpResult,
  httpIdempotency,
  problemErrorHandler,
  validateJsonBody,
  type WithBody,
} from 'keystone-idempotency/http';
import { sqsMessageBody } from 'keystone-idempotency/sqs';
import { MetricService } from '../lib/metrics/definitions';
import { serviceData } from '../lib/payments/config';
import { PROBLEM_TYPE_BASE } from '../lib/payments/problem-types';
import { withInvocationDeadline } from '../lib/runtime/deadline';
import { publishMetrics, serviceMetrics } from '../lib/runtime/metrics';
import { secretFromEnv } from '../lib/runtime/secrets';
import { tracing } from '../lib/runtime/tracing';
import { settlementQueueUrl, sqsClient } from '../lib/settlement/config';
import { ChargeSucceededEvent, type WebhookAcknowledgement } from '../lib/settlement/event';
import { acknowledgeOrderCharges } from '../lib/settlement/order-charges';
import { verifyWebhookSignature } from '../lib/webhooks/verify-middleware';

/**
 * POST /webhooks/processor: verify the signature (401), validate the event (400), dedupe on the event id, enqueue it
 * for settlement, and answer 200 fast. A resent event replays the stored 200 without enqueueing again; an enqueue
 * that fails releases the id so the processor's retry enqueues it (the consumer dedupes on the id too).
 */
const logger = new Logger({ serviceName: 'webhooks' });
const metrics = serviceMetrics(MetricService.webhooks);
const data = serviceData();
const { store } = data;
const sqs = sqsClient();
const queueUrl = settlementQueueUrl();
const secret = secretFromEnv('PROCESSOR_WEBHOOK_SECRET');

type WebhookContext = Context & WithBody<ChargeSucceededEvent>;

async function receiveWebhook(_event: HttpEvent, context: WebhookContext): Promise<APIGatewayProxyResult> {
  const event = context.body;
  await sqs.send(
    new SendMessageCommand({
      QueueUrl: queueUrl,
      // The processor's strings may hold characters SQS refuses (U+FFFF, say): escaped, the event still parses back.
      MessageBody: sqsMessageBody(event),
      MessageAttributes: { event_id: { DataType: 'String', StringValue: event.id } },
    }),
  );
  const acknowledgement: WebhookAcknowledgement = { received: event.id };
  return { statusCode: 200, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(acknowledgement) };
}

export const handler = withInvocationDeadline(
  middy<HttpEvent, HttpResult, Error, WebhookContext>(receiveWebhook)
    .use(tracing('webhooks', [...data.tracedClients, sqs]))
    .use(publishMetrics(metrics))
    .use(problemErrorHandler({ logger, problemTypeBase: PROBLEM_TYPE_BASE }))
    .use(verifyWebhookSignature({ secret, clock: systemClock }))
    // An order's charge is the order's: acknowledged, never queued for settlement.
    .use(acknowledgeOrderCharges())
    .use(validateJsonBody(ChargeSucceededEvent))
    .use(
      httpIdempotency({
        store,
        logger,
        metrics,
        // The processor is the caller and the event id is its idempotency key.
        accountId: () => 'processor',
        key: (_event, context) => (context as WebhookContext).body.id,
      }),
    ),
);
