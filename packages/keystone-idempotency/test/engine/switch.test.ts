import { randomUUID } from 'node:crypto';
import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import { DynamoDbStore } from '../../src/dynamodb/store';
import { ConfigurationError } from '../../src/engine/errors';
import { makeIdempotent } from '../../src/engine/make-idempotent';
import { IDEMPOTENCY_DISABLED_ENV } from '../../src/engine/switch';
import { httpIdempotency, type WithIdempotency } from '../../src/http/idempotency';
import { lambdaHandler } from '../../src/http/lambda-handler';
import { apiEvent, lambdaContext } from '../support/api-event';
import { testDatabase } from '../support/dynamodb';

const db = testDatabase();
const store = () => new DynamoDbStore({ client: db.doc, tableName: db.idempotencyTable });

/** Sets environment variables for each test of the enclosing describe, and puts them back as they were. */
function withEnv(values: Record<string, string | undefined>): void {
  let before: Record<string, string | undefined> = {};
  const set = (entries: Record<string, string | undefined>) => {
    for (const [name, value] of Object.entries(entries)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
  beforeEach(() => {
    before = Object.fromEntries(Object.keys(values).map((name) => [name, process.env[name]]));
    set(values);
  });
  afterEach(() => set(before));
}

function shipping() {
  const downstreamKeys: string[] = [];
  const book = makeIdempotent(
    async (order: { orderId: string }, idempotency) => {
      downstreamKeys.push(idempotency.downstreamKey);
      idempotency.stage({ Put: { TableName: db.effectsTable, Item: { pk: `SHIP#${order.orderId}`, sk: 'x' } } });
      return { shipmentId: `shp_${downstreamKeys.length}` };
    },
    { store: store(), name: 'book-shipment', key: (order) => order.orderId },
  );
  return { book, downstreamKeys };
}

describe(`${IDEMPOTENCY_DISABLED_ENV}=true`, () => {
  describe('in a unit test', () => {
    withEnv({ [IDEMPOTENCY_DISABLED_ENV]: 'true', AWS_LAMBDA_FUNCTION_NAME: undefined });

    it('runs makeIdempotent’s function on every call, under a fresh downstream key, touching no store', async () => {
      const { book, downstreamKeys } = shipping();
      const order = { orderId: randomUUID() };
      db.requests.reset();
      expect(await book(order)).toEqual({ shipmentId: 'shp_1' });
      expect(await book(order)).toEqual({ shipmentId: 'shp_2' });
      expect(db.requests.sent).toEqual([]);
      expect(new Set(downstreamKeys).size).toBe(2);
      // What the function staged is dropped with the rest: nothing is written.
      expect(await db.itemsUnder(`SHIP#${order.orderId}`)).toBe(0);
    });

    it('runs an API handler on every request, with no replay and no store', async () => {
      let runs = 0;
      const handler = lambdaHandler(
        middy<APIGatewayProxyEvent, APIGatewayProxyResult, Error, Context & WithIdempotency<DynamoDbStore>>(
          async () => ({
            statusCode: 201,
            body: JSON.stringify({ run: ++runs }),
          }),
        ).use(httpIdempotency({ store: store() })),
      );
      const event = apiEvent({ body: { amount: 1 }, headers: { 'Idempotency-Key': randomUUID() } });
      db.requests.reset();
      const first = await handler(event, lambdaContext());
      const second = await handler(event, lambdaContext());
      expect([first.body, second.body]).toEqual(['{"run":1}', '{"run":2}']);
      expect(second.headers?.['Idempotent-Replayed']).toBeUndefined();
      expect(db.requests.sent).toEqual([]);
    });
  });

  describe('turned back off', () => {
    withEnv({ [IDEMPOTENCY_DISABLED_ENV]: 'false', AWS_LAMBDA_FUNCTION_NAME: undefined });

    it('is read on every call: the next call is idempotent again', async () => {
      const { book, downstreamKeys } = shipping();
      const order = { orderId: randomUUID() };
      await book(order);
      await book(order);
      expect(downstreamKeys).toHaveLength(1);
    });
  });

  describe('inside a Lambda function', () => {
    withEnv({ [IDEMPOTENCY_DISABLED_ENV]: 'true', AWS_LAMBDA_FUNCTION_NAME: 'payments-create' });

    it('is refused: the call throws rather than run without idempotency', async () => {
      const { book, downstreamKeys } = shipping();
      await expect(book({ orderId: randomUUID() })).rejects.toThrow(ConfigurationError);
      expect(downstreamKeys).toEqual([]);
    });
  });

  describe('set to something that is not a boolean', () => {
    withEnv({ [IDEMPOTENCY_DISABLED_ENV]: 'yes please', AWS_LAMBDA_FUNCTION_NAME: undefined });

    it('is refused rather than guessed', async () => {
      const { book } = shipping();
      await expect(book({ orderId: randomUUID() })).rejects.toThrow(/must be true or false/);
    });
  });
});
