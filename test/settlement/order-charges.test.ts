import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { acknowledgeOrderCharges } from '../../lib/settlement/order-charges';
import { apiEvent, lambdaContext } from '../support/api-event';

/** What reaches the rest of the webhook receiver (the body's validation, the queue) after the order check. */
const reached: string[] = [];
const handler = middy<APIGatewayProxyEvent, APIGatewayProxyResult>(async (event: APIGatewayProxyEvent) => {
  reached.push(event.body ?? '');
  return { statusCode: 200, body: '{"received":"queued"}' };
}).use(acknowledgeOrderCharges());

const chargeEvent = (metadata: Record<string, string>) => ({
  id: 'evt_1',
  type: 'charge.succeeded',
  data: { object: { id: 'ch_1', metadata } },
});

async function deliver(body: unknown) {
  reached.length = 0;
  return handler(apiEvent({ resource: '/webhooks/processor', body }), lambdaContext());
}

describe('acknowledgeOrderCharges', () => {
  it("acknowledges an order's charge without passing it on", async () => {
    const response = await deliver(chargeEvent({ order_id: 'ord_1', account_id: 'acct_1' }));
    expect(response).toMatchObject({ statusCode: 200, body: JSON.stringify({ received: 'evt_1' }) });
    expect(reached).toEqual([]);
  });

  it.each([
    ["a payment's charge", chargeEvent({ payment_id: 'pay_1', account_id: 'acct_1' })],
    ['a charge naming both', chargeEvent({ payment_id: 'pay_1', order_id: 'ord_1' })],
    ['a body that is not JSON', 'not json'],
    ['an event without an id', { data: { object: { metadata: { order_id: 'ord_1' } } } }],
  ])('passes %s on to the receiver', async (_case, body) => {
    const response = await deliver(body);
    expect(response.body).toBe('{"received":"queued"}');
    expect(reached).toHaveLength(1);
  });
});
