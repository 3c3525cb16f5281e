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
import { orderMailerClient, warehouseClient } from '../lib/orders/config';
import { createOrder } from '../lib/orders/create-order';
import { OrderRequest } from '../lib/orders/schema';
import { processorClient, serviceData } from '../lib/payments/config';
import { PROBLEM_TYPE_BASE } from '../lib/payments/problem-types';
import { withInvocationDeadline } from '../lib/runtime/deadline';
import { publishMetrics, serviceMetrics } from '../lib/runtime/metrics';
import { tracing } from '../lib/runtime/tracing';

/**
 * POST /orders: validate, claim the key, then reserve, charge, ship and confirm as recovery points of the one
 * operation (lib/orders/create-order.ts), committing the order with the key. Served the same behind a REST API or
 * an HTTP API, on either store.
 */
const logger = new Logger({ serviceName: 'orders' });
const metrics = serviceMetrics(MetricService.orders);
const data = serviceData();
const deps = {
  orders: data.orders,
  processor: processorClient(),
  warehouse: warehouseClient(),
  mailer: orderMailerClient(),
  clock: systemClock,
};
const { store } = data;

type OrderContext = Context & WithIdempotency<IdempotencyStore<unknown>> & WithBody<OrderRequest>;

async function createOrderHandler(event: HttpEvent, context: OrderContext): Promise<APIGatewayProxyResult> {
  const accountId = requireAccountId(event);
  return createOrder(deps, {
    accountId,
    body: context.body,
    idempotency: context.idempotency,
  });
}

export const handler = lambdaHandler(
  withInvocationDeadline(
    middy<HttpEvent, HttpResult, Error, OrderContext>(createOrderHandler)
      .use(tracing('orders', data.tracedClients))
      .use(publishMetrics(metrics))
      .use(problemErrorHandler({ logger, problemTypeBase: PROBLEM_TYPE_BASE }))
      .use(validateJsonBody(OrderRequest))
      // Recoverable: an order whose client never comes back is driven forward by the completer, step by step.
      .use(httpIdempotency({ store, logger, metrics, recoverable: true })),
  ),
);
