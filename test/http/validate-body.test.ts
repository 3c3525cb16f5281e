import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import { validateJsonBody, type WithBody } from 'keystone-idempotency/http';
import { PaymentRequest } from '../../lib/payments/schema';
import { apiEvent, lambdaContext } from '../support/api-event';

/**
 * The body validation POST /payments runs, with its real (zod/mini) schema: what a client reads when its body is
 * wrong. Nothing here loads classic zod, which would configure English messages for every schema as a side effect:
 * these are the messages a function bundled with zod/mini alone sends.
 */
type Ctx = Context & WithBody<PaymentRequest>;

const seen: PaymentRequest[] = [];
const handler = middy<APIGatewayProxyEvent, APIGatewayProxyResult, Error, Ctx>(
  async (_event: unknown, context: Ctx) => {
    seen.push(context.body);
    return { statusCode: 201, body: '{}' };
  },
).use(validateJsonBody(PaymentRequest));

async function send(body: unknown, headers: Record<string, string> = {}) {
  const response = await handler(apiEvent({ body, headers }), lambdaContext() as Ctx);
  return { statusCode: response.statusCode, headers: response.headers, problem: JSON.parse(response.body) };
}

describe('validateJsonBody', () => {
  it('lists every problem with the body at once, each in words a client can act on', async () => {
    const { statusCode, headers, problem } = await send({ amount: 0, currency: 'usdollars', source: '', tip: 1 });
    expect(statusCode).toBe(400);
    expect(headers).toMatchObject({ 'Content-Type': 'application/problem+json' });
    expect(problem).toMatchObject({ type: expect.stringMatching(/\/invalid-body$/), status: 400 });
    expect(problem.errors).toEqual([
      { path: 'amount', message: 'amount must be positive' },
      { path: 'currency', message: 'currency must be a lower-case ISO 4217 code such as usd' },
      { path: 'source', message: 'source is required' },
      { path: '', message: 'Unrecognized key: "tip"' },
    ]);
  });

  it('says a field is too long, not that it has the wrong type', async () => {
    const { problem } = await send({
      amount: 100,
      currency: 'usd',
      source: 'x'.repeat(256),
      description: 'y'.repeat(1001),
    });
    expect(problem.errors).toEqual([
      { path: 'source', message: 'source must be at most 255 characters' },
      { path: 'description', message: 'description must be at most 1000 characters' },
    ]);
  });

  it('names the types a field must have, and the largest amount', async () => {
    const { problem } = await send({ amount: 100_000_000, currency: 12, source: null, description: 5 });
    expect(problem.errors).toEqual([
      { path: 'amount', message: 'amount must be at most 99999999' },
      { path: 'currency', message: 'currency must be a string' },
      { path: 'source', message: 'source must be a string' },
      { path: 'description', message: 'description must be a string' },
    ]);
  });

  it('says so when the body is JSON but not an object', async () => {
    expect((await send([])).problem.errors).toEqual([
      { path: '', message: 'Invalid input: expected object, received array' },
    ]);
  });

  it('turns away a body that is not JSON, or not sent as JSON', async () => {
    expect((await send('{"amount":')).problem.errors).toEqual([{ path: '', message: 'expected a JSON document' }]);
    expect((await send({ amount: 1 }, { 'Content-Type': 'text/plain' })).problem.errors).toEqual([
      { path: '', message: 'unsupported content type "text/plain"' },
    ]);
  });

  it('hands the handler the parsed body', async () => {
    const body = { amount: 4200, currency: 'usd', source: 'tok_visa', description: 'Order 42' };
    expect((await send(body)).statusCode).toBe(201);
    expect(seen.at(-1)).toEqual(body);
  });
});
