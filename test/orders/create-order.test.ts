import { randomUUID } from 'node:crypto';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { makeIdempotent, systemClock } from 'keystone-idempotency/engine';
import { defaultIsStorable } from 'keystone-idempotency/http';
import { type CreateOrderDeps, createOrder } from '../../lib/orders/create-order';
import { OrderMailerClient } from '../../lib/orders/mailer-client';
import type { OrdersRepository } from '../../lib/orders/repository';
import type { OrderRequest } from '../../lib/orders/schema';
import { WarehouseClient } from '../../lib/orders/warehouse-client';
import { ProcessorClient } from '../../lib/payments/processor-client';
import { DECLINING_SOURCE } from '../../lib/sandbox/charges';
import { type Sandbox, startSandbox } from '../../lib/sandbox/processor';
import { ordersSubjects } from '../support/orders';

/**
 * Two orders racing for the last units of a SKU, on both databases: the second order's stock check passes, the first
 * takes the units, and the second's reservation then fails the stock's own condition at its commit. The second is
 * answered as too little stock (a stored 409, replayed), not a 500, and nothing of it is reserved or charged.
 */
class Unstored extends Error {
  constructor(readonly answer: APIGatewayProxyResult) {
    super(`unstored ${answer.statusCode}`);
  }
}

const subjects = ordersSubjects();
let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = await startSandbox();
});
afterAll(() => sandbox.close());

describe.each(['dynamodb', 'postgres'] as const)('an order on %s', (kind) => {
  const setUp = async () => {
    const { orders, store } = subjects[kind]();
    const sku = `sku_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    await orders.seedStock(sku, 2);
    const body: OrderRequest = {
      items: [{ sku, quantity: 2 }],
      amount: 4200,
      currency: 'usd',
      source: 'tok_visa',
      email: 'buyer@example.com',
    };
    const clients = {
      processor: new ProcessorClient({ baseUrl: sandbox.url, timeoutMs: 5000 }),
      warehouse: new WarehouseClient({ baseUrl: sandbox.url, timeoutMs: 5000 }),
      mailer: new OrderMailerClient({ baseUrl: sandbox.url, timeoutMs: 5000 }),
      clock: systemClock,
    };
    // What the HTTP adapter stores, stored; anything else (a 5xx) released, as POST /orders does.
    const order = (deps: CreateOrderDeps<unknown>, request = body) => {
      const idempotent = makeIdempotent(
        async (_input: { key: string }, handle): Promise<APIGatewayProxyResult> => {
          const answer = await createOrder(deps, { accountId: 'acct_race', body: request, idempotency: handle });
          if (!defaultIsStorable(answer.statusCode)) throw new Unstored(answer);
          return answer;
        },
        { store, name: `orders-race-${kind}`, key: (input) => input.key, recoverable: true },
      );
      return (input: { key: string }) =>
        idempotent(input).catch((error: unknown) => {
          if (error instanceof Unstored) return error.answer;
          throw error;
        });
    };
    return { orders, sku, body, clients, order };
  };
  /** The repository with its stock read replaced by `read`, everything else the real one. */
  const withShortages = (
    orders: OrdersRepository<unknown>,
    read: OrdersRepository<unknown>['shortages'],
  ): OrdersRepository<unknown> =>
    Object.assign(Object.create(orders) as OrdersRepository<unknown>, { shortages: read });

  it('whose stock is taken and given back while it reserves answers 503 unstored, and the retry is the order', async () => {
    const { orders, sku, body, clients, order } = await setUp();
    // The first order takes both units, then its card is declined and its reservation released. Its charge waits for
    // the second order's failed reservation, so the units are gone when the second commits and back when it looks.
    let releaseCharge!: () => void;
    const charge = new Promise<void>((resolve) => {
      releaseCharge = resolve;
    });
    let reachedCharge!: () => void;
    const charging = new Promise<void>((resolve) => {
      reachedCharge = resolve;
    });
    const gated = Object.assign(Object.create(clients.processor) as ProcessorClient, {
      charge: async (...args: Parameters<ProcessorClient['charge']>) => {
        reachedCharge();
        await charge;
        return clients.processor.charge(...args);
      },
    });
    const first = order({ ...clients, processor: gated, orders }, { ...body, source: DECLINING_SOURCE });
    let firstAnswer: Promise<APIGatewayProxyResult> | undefined;
    let reads = 0;
    const racing = withShortages(orders, async (items) => {
      reads += 1;
      if (reads === 1) {
        const read = await orders.shortages(items);
        firstAnswer = first({ key: randomUUID() });
        await charging;
        return read;
      }
      releaseCharge();
      await firstAnswer;
      return orders.shortages(items);
    });
    const key = randomUUID();
    const chargesBefore = sandbox.charges().length;

    const answer = await order({ ...clients, orders: racing })({ key });

    expect((await firstAnswer)?.statusCode).toBe(402);
    expect(answer.statusCode).toBe(503);
    expect(answer.headers?.['Retry-After']).toBe('1');
    expect(JSON.parse(answer.body)).toMatchObject({ type: expect.stringMatching(/stock-contended$/) });
    // Not stored: the same key, retried, is the order.
    const retried = await order({ ...clients, orders })({ key });
    expect(retried.statusCode).toBe(201);
    expect(sandbox.charges().length - chargesBefore).toBe(1);
    expect(await orders.getInventory(sku)).toMatchObject({ available: 0, reserved: 2 });
  });

  it('that loses the last units to a concurrent order answers a stored 409, and reserves and charges nothing', async () => {
    const { orders, sku, clients, order } = await setUp();
    const first = order({ ...clients, orders });
    const firstKey = randomUUID();
    let firstAnswer: APIGatewayProxyResult | undefined;
    // The second order's stock check reads 2 available; before it reserves, the first order takes both.
    const racing = withShortages(orders, async (items) => {
      const read = await orders.shortages(items);
      firstAnswer ??= await first({ key: firstKey });
      return read;
    });
    const second = order({ ...clients, orders: racing });
    const secondKey = randomUUID();
    const chargesBefore = sandbox.charges().length;

    const answer = await second({ key: secondKey });

    expect(firstAnswer?.statusCode).toBe(201);
    expect(answer.statusCode).toBe(409);
    expect(JSON.parse(answer.body)).toMatchObject({
      type: expect.stringMatching(/insufficient-stock$/),
      shortages: [{ sku, requested: 2, available: 0 }],
    });
    // Stored: the same key answers the same, and nothing runs again.
    const replay = await order({ ...clients, orders })({ key: secondKey });
    expect(replay.statusCode).toBe(409);
    expect(replay.body).toBe(answer.body);
    expect(sandbox.charges().length - chargesBefore).toBe(1);
    expect(await orders.getInventory(sku)).toMatchObject({ available: 0, reserved: 2 });
  });
});
