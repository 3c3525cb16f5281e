/**
 * Type tests for recovery points (`IdempotencyHandle.step`), compiled by `npm run typecheck`, never run: each
 * `@ts-expect-error` line must stay an error, and each line beside it without one must keep compiling. The step's
 * result type comes from its function alone; a resolver must find that type; a step's context stages the store's
 * own effects, as the handle does.
 */
import type { IdempotencyHandle, StepContext, StepLookup } from 'keystone-idempotency';
import type { EffectItem } from 'keystone-idempotency/dynamodb';
import type { PostgresEffect } from 'keystone-idempotency/postgres';

declare const dynamoDb: IdempotencyHandle<EffectItem>;
declare const postgres: IdempotencyHandle<PostgresEffect>;
const putItem: EffectItem = { Put: { TableName: 'orders', Item: { pk: 'ORDER#1' } } };

export async function stepTypes(): Promise<void> {
  // The result's type is the function's.
  const charge: { id: string } = await dynamoDb.step('charge', async () => ({ id: 'ch_1' }));
  // @ts-expect-error a step answering { id: string } is not a number
  const wrong: number = await dynamoDb.step('charge-again', async () => ({ id: 'ch_1' }));

  // A resolver finds the step's own type; another is an error (NoInfer: the function decides T).
  await dynamoDb.step('ship', async () => ({ shipmentId: 'shp_1' }), {
    resolve: async (): Promise<StepLookup<{ shipmentId: string }>> => ({ found: { shipmentId: 'shp_1' } }),
    landsWithinMs: 30_000,
  });
  await dynamoDb.step('ship-2', async () => ({ shipmentId: 'shp_1' }), {
    // @ts-expect-error the resolver finds a number where the step returns { shipmentId }
    resolve: async () => ({ found: 42 }),
    landsWithinMs: 30_000,
  });
  // @ts-expect-error a step resolved by lookup says how long its call can take to land: "not found" waits for it
  await dynamoDb.step('ship-3', async () => 1, { resolve: async () => ({ notFound: true }) });
  // @ts-expect-error a step is either deduped / at-least-once or resolved, not both
  await dynamoDb.step('both', async () => 1, { outside: 'at-least-once', resolve: async () => ({ notFound: true }) });

  // A step's context stages the store's effects, and only those.
  await dynamoDb.step('reserve', async (step: StepContext<EffectItem>) => {
    step.stage(putItem);
    // @ts-expect-error SQL staged through a DynamoDB store's step
    step.stage({ text: 'INSERT INTO orders DEFAULT VALUES' });
  });
  await postgres.step('reserve', async (step) => {
    step.stage({ text: 'INSERT INTO orders DEFAULT VALUES' });
    // @ts-expect-error a DynamoDB item staged through a PostgreSQL store's step
    step.stage(putItem);
  });
  // A compensation is given the step's result, typed.
  await dynamoDb.step('hold', async () => ({ holdId: 'h_1' }), {
    compensate: async (result, step) => {
      const holdId: string = result.holdId;
      step.stage(putItem);
      void holdId;
    },
  });
  void charge;
  void wrong;
}
