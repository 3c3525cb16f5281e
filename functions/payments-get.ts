import { Logger } from '@aws-lambda-powertools/logger';
import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyEventV2, APIGatewayProxyResult } from 'aws-lambda';
import { HttpProblem, type HttpResult, problemErrorHandler, requireAccountId } from 'keystone-idempotency/http';
import { serviceData } from '../lib/payments/config';
import { isPaymentId } from '../lib/payments/payment';
import { PaymentProblemType, PROBLEM_TYPE_BASE } from '../lib/payments/problem-types';
import { withInvocationDeadline } from '../lib/runtime/deadline';
import { tracing } from '../lib/runtime/tracing';

/**
 * GET /payments/{id}: the caller's own payment; anyone else's is indistinguishable from a missing one (404). Behind an
 * API Gateway REST or HTTP API, which both route `{id}` into `pathParameters`.
 */
const logger = new Logger({ serviceName: 'payments' });
const data = serviceData();
const { payments } = data;

type ApiGatewayEvent = APIGatewayProxyEvent | APIGatewayProxyEventV2;

async function getPaymentHandler(event: ApiGatewayEvent): Promise<APIGatewayProxyResult> {
  const accountId = requireAccountId(event);
  const paymentId = event.pathParameters?.id;
  // An id that can't be ours is not looked up: it is missing, whatever its size (DynamoDB refuses keys over its limit).
  const payment = isPaymentId(paymentId) ? await payments.getPayment(accountId, paymentId) : undefined;
  if (!payment)
    throw new HttpProblem(404, PaymentProblemType.notFound, 'Payment not found', {
      detail: 'No such payment.',
    });
  return { statusCode: 200, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(payment) };
}

export const handler = withInvocationDeadline(
  middy<ApiGatewayEvent, HttpResult>(getPaymentHandler)
    .use(tracing('payments', data.tracedClients))
    .use(problemErrorHandler({ logger, problemTypeBase: PROBLEM_TYPE_BASE })),
);
