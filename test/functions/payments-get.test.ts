import {
  type DynamoDbFaultProxy,
  DynamoDbTarget,
  startDynamoDbFaultProxy,
} from '@keystone-idempotency/local-aws/dynamodb-fault-proxy';
import type { APIGatewayProxyEvent, APIGatewayProxyEventV2, APIGatewayProxyResult } from 'aws-lambda';
import { apiEvent, lambdaContext } from '../support/api-event';
import { testDatabase } from '../support/dynamodb';
import { httpApiEvent, lambdaCaller } from '../support/front-door-events';

/**
 * GET /payments/{id}, the deployed handler itself, with its DynamoDB traffic seen through a recording proxy: an id
 * that cannot be a payment of ours is a 404 without a lookup (DynamoDB refuses keys over its size limit, which used to
 * surface as a 500), and a well-formed one is looked up.
 */
const db = testDatabase();
let proxy: DynamoDbFaultProxy;
let handler: (
  event: APIGatewayProxyEvent | APIGatewayProxyEventV2,
  context: ReturnType<typeof lambdaContext>,
) => Promise<APIGatewayProxyResult>;

beforeAll(async () => {
  proxy = await startDynamoDbFaultProxy(process.env.DYNAMODB_ENDPOINT!);
  // The function reads its configuration at import (cold start), as in Lambda.
  const env = { DYNAMODB_ENDPOINT: proxy.url, PAYMENTS_TABLE: db.paymentsTable };
  const saved = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
  Object.assign(process.env, env);
  try {
    handler = (await import('../../functions/payments-get')).handler as typeof handler;
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
});
afterAll(() => proxy?.close());

function get(id: string) {
  const event = apiEvent({
    method: 'GET',
    resource: '/payments/{id}',
    path: `/payments/${id}`,
    pathParameters: { id },
    accountId: 'acct_g',
  });
  return handler(event, lambdaContext());
}

const lookups = () => proxy.requests({ name: 'any GetItem', target: DynamoDbTarget.GetItem }).length;

describe('GET /payments/{id}', () => {
  it('answers 404 for an id that cannot be ours, without looking it up', async () => {
    const before = lookups();
    for (const id of [`pay_${'a'.repeat(1020)}`, 'pay_short', '../../etc', 'PAY_0123456789abcdef01234567']) {
      const response = await get(id);
      expect(response.statusCode).toBe(404);
      expect(JSON.parse(response.body)).toMatchObject({ type: 'https://keystone-idempotency.dev/problems/not-found' });
    }
    expect(lookups()).toBe(before);
  });

  it('looks a well-formed id up, and answers 404 when it is not there', async () => {
    const before = lookups();
    expect((await get(`pay_${'0'.repeat(24)}`)).statusCode).toBe(404);
    expect(lookups()).toBe(before + 1);
  });

  it('reads the id and the account from an HTTP API’s event (payload 2.0) too', async () => {
    const id = `pay_${'1'.repeat(24)}`;
    const spec = { method: 'GET', route: '/payments/{id}', path: `/payments/${id}`, pathParameters: { id } };
    const before = lookups();
    const response = await handler(httpApiEvent(spec, lambdaCaller('acct_g')), lambdaContext());
    expect(response.statusCode).toBe(404);
    expect(response).not.toHaveProperty('multiValueHeaders');
    expect(lookups()).toBe(before + 1);
    const unauthenticated = await handler(httpApiEvent(spec, { kind: 'none' }), lambdaContext());
    expect(unauthenticated.statusCode).toBe(401);
  });
});
