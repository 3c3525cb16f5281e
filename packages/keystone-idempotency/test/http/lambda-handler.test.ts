import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import { z } from 'zod/mini';
import { lambdaHandler } from '../../src/http/lambda-handler';
import { validateJsonBody, type WithBody } from '../../src/http/validate-body';
import { apiEvent, lambdaContext } from '../support/api-event';

const Order = z.strictObject({ amount: z.number() });
type OrderContext = Context & WithBody<z.infer<typeof Order>>;

async function order(_event: APIGatewayProxyEvent, context: OrderContext): Promise<APIGatewayProxyResult> {
  return { statusCode: 200, body: JSON.stringify({ amount: context.body.amount }) };
}
const composed = middy<APIGatewayProxyEvent, APIGatewayProxyResult, Error, OrderContext>(order).use(
  validateJsonBody(Order),
);

describe('lambdaHandler', () => {
  it('is called with the plain Lambda context: the middlewares add the rest on the way in', async () => {
    const context: Context = lambdaContext();
    // middy's own type asks the caller for the context its middlewares build.
    // @ts-expect-error Property 'body' is missing in type 'Context'
    await composed(apiEvent({ body: { amount: 1 } }), context);

    const handler = lambdaHandler(composed);
    const response = await handler(apiEvent({ body: { amount: 42 } }), context);
    expect(response).toMatchObject({ statusCode: 200, body: '{"amount":42}' });
  });

  it('is the same function', () => {
    expect(lambdaHandler(composed)).toBe(composed);
  });
});
