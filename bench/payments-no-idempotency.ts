import { randomUUID } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import { PutCommand, type PutCommandInput } from '@aws-sdk/lib-dynamodb';
import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import type { EffectItem } from 'keystone-idempotency/dynamodb';
import { systemClock } from 'keystone-idempotency/engine';
import { problemErrorHandler, validateJsonBody, type WithBody } from 'keystone-idempotency/http';
import { processorClient } from '../lib/payments/config';
import { createPayment } from '../lib/payments/create-payment';
import { dynamoDbData } from '../lib/payments/data-dynamodb';
import { PaymentRequest } from '../lib/payments/schema';
import { documentClient } from '../lib/runtime/clients';

/**
 * POST /payments with idempotency switched off: the benchmark's "what does the key cost" reference. The same
 * createPayment flow, body validation and problem responses as functions/payments-create.ts, without the
 * idempotency middleware: every request charges under a fresh random downstream key, and the payment row is written
 * on its own (one PutItem) instead of in the commit transaction. A retry is a second payment.
 */
const logger = new Logger({ serviceName: 'payments-no-idempotency' });
const deps = { processor: processorClient(), payments: dynamoDbData().payments, clock: systemClock };
const client = documentClient();

type PaymentContext = Context & WithBody<PaymentRequest>;

async function createPaymentHandler(
  event: APIGatewayProxyEvent,
  context: PaymentContext,
): Promise<APIGatewayProxyResult> {
  const accountId = String(event.requestContext.authorizer?.accountId);
  const staged: EffectItem[] = [];
  const downstreamKey = `idk_${randomUUID().replaceAll('-', '')}`;
  const response = await createPayment(deps, {
    accountId,
    body: context.body,
    idempotency: {
      key: `no-idempotency|${downstreamKey}`,
      downstreamKey,
      attempt: 1,
      stage: (item) => staged.push(item),
      // No recovery points here: a step just runs (payments has one outside call and no steps).
      step: (name, run) =>
        run({
          name,
          downstreamKey: `${downstreamKey}:${name}`,
          attempt: 1,
          stage: (...items) => staged.push(...items),
        }),
    },
  });
  for (const item of staged) await client.send(new PutCommand(item.Put as PutCommandInput));
  return response;
}

export const handler = middy<APIGatewayProxyEvent, APIGatewayProxyResult, Error, PaymentContext>(createPaymentHandler)
  .use(problemErrorHandler({ logger }))
  .use(validateJsonBody(PaymentRequest));
