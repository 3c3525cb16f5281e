import { Logger } from '@aws-lambda-powertools/logger';
import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyEventV2, APIGatewayProxyResult } from 'aws-lambda';
import { HttpProblem, type HttpResult, problemErrorHandler, requireAccountId } from 'keystone-idempotency/http';
import { isOrderId } from '../lib/orders/order';
import { serviceData } from '../lib/payments/config';
import { PaymentProblemType, PROBLEM_TYPE_BASE } from '../lib/payments/problem-types';
import { withInvocationDeadline } from '../lib/runtime/deadline';
import { tracing } from '../lib/runtime/tracing';

/**
 * GET /orders/{id}: the caller's own order and each step's state (pending, completed, released), so a client can
 * see how far an order got; anyone else's order is indistinguishable from a missing one (404).
 */
const logger = new Logger({ serviceName: 'orders' });
const data = serviceData();

type ApiGatewayEvent = APIGatewayProxyEvent | APIGatewayProxyEventV2;

async function getOrderHandler(event: ApiGatewayEvent): Promise<APIGatewayProxyResult> {
  const accountId = requireAccountId(event);
  const orderId = event.pathParameters?.id;
  const order = isOrderId(orderId) ? await data.orders.getOrder(accountId, orderId) : undefined;
  if (!order) throw new HttpProblem(404, PaymentProblemType.notFound, 'Order not found', { detail: 'No such order.' });
  return { statusCode: 200, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(order) };
}

export const handler = withInvocationDeadline(
  middy<ApiGatewayEvent, HttpResult>(getOrderHandler)
    .use(tracing('orders', data.tracedClients))
    .use(problemErrorHandler({ logger, problemTypeBase: PROBLEM_TYPE_BASE })),
);
