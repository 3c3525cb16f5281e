import { Logger } from '@aws-lambda-powertools/logger';
import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyEventV2, APIGatewayProxyResult } from 'aws-lambda';
import { HttpProblem, type HttpResult, problemErrorHandler } from 'keystone-idempotency/http';
import { isSku } from '../lib/orders/order';
import { serviceData } from '../lib/payments/config';
import { PaymentProblemType, PROBLEM_TYPE_BASE } from '../lib/payments/problem-types';
import { withInvocationDeadline } from '../lib/runtime/deadline';
import { tracing } from '../lib/runtime/tracing';

/** GET /inventory/{sku}: the units a SKU has available and the units orders hold (`reserved`). */
const logger = new Logger({ serviceName: 'orders' });
const data = serviceData();

type ApiGatewayEvent = APIGatewayProxyEvent | APIGatewayProxyEventV2;

async function getInventoryHandler(event: ApiGatewayEvent): Promise<APIGatewayProxyResult> {
  const sku = event.pathParameters?.sku;
  const inventory = isSku(sku) ? await data.orders.getInventory(sku) : undefined;
  if (!inventory) throw new HttpProblem(404, PaymentProblemType.notFound, 'SKU not found', { detail: 'No such SKU.' });
  return { statusCode: 200, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(inventory) };
}

export const handler = withInvocationDeadline(
  middy<ApiGatewayEvent, HttpResult>(getInventoryHandler)
    .use(tracing('orders', data.tracedClients))
    .use(problemErrorHandler({ logger, problemTypeBase: PROBLEM_TYPE_BASE })),
);
