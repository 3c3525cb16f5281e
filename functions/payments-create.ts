import { Logger } from '@aws-lambda-powertools/logger';
import middy from '@middy/core';
import type { APIGatewayProxyResult, Context } from 'aws-lambda';
import { type IdempotencyStore, systemClock } from 'keystone-idempotency/engine';
import {
  type HttpEvent,
  type HttpResult,
  httpIdempotency,
  lambdaHandler,
  problemErrorHandler,
  requireAccountId,
  validateJsonBody,
  type WithBody,
  type WithIdempotency,
} from 'keystone-idempotency/http';
import { MetricService } from '../lib/metrics/definitions';
import { processorClient, serviceData } from '../lib/payments/config';
import { createPayment } from '../lib/payments/create-payment';
import { PROBLEM_TYPE_BASE } from '../lib/payments/problem-types';
import { PaymentRequest } from '../lib/payments/schema';
import { withInvocationDeadline } from '../lib/runtime/deadline';
import { publishMetrics, serviceMetrics } from '../lib/runtime/metrics';
import { tracing } from '../lib/runtime/tracing';

/**
 * POST /payments: validate, claim the key, charge under the downstream key, commit the payment with the key. Served
 * the same behind a REST API or an HTTP API (or a function URL or an ALB): the middlewares read each event and answer
 * in its format.
 */
const logger = new Logger({ serviceName: 'payments' });
const metrics = serviceMetrics(MetricService.payments);
const data = serviceData();
const deps = { processor: processorClient(), payments: data.payments, clock: systemClock };
const { store } = data;

type PaymentContext = Context & WithIdempotency<IdempotencyStore<unknown>> & WithBody<PaymentRequest>;

async function createPaymentHandler(event: HttpEvent, context: PaymentContext): Promise<APIGatewayProxyResult> {
  const accountId = requireAccountId(event);
  return createPayment(deps, { accountId, body: context.body, idempotency: context.idempotency });
}

export const handler = lambdaHandler(
  withInvocationDeadline(
    middy<HttpEvent, HttpResult, Error, PaymentContext>(createPaymentHandler)
      .use(tracing('payments', data.tracedClients))
      .use(publishMetrics(metrics))
      .use(problemErrorHandler({ logger, problemTypeBase: PROBLEM_TYPE_BASE }))
      .use(validateJsonBody(PaymentRequest))
      // Recoverable: a charge whose client never comes back is finished by settlement or the completer.
      .use(httpIdempotency({ store, logger, metrics, recoverable: true })),
  ),
);
