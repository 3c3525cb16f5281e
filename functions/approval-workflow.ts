import { type DurableContext, withDurableExecution } from '@aws/durable-execution-sdk-js';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { type DurableRequest, idempotentStep } from 'keystone-idempotency/durable';
import { DynamoDbStore } from 'keystone-idempotency/dynamodb';

/**
 * A refund approval, as a Lambda durable function: it waits (up to three days) for a person's decision on a callback,
 * then records the decision in one idempotent step. The wait outlasts any invocation; the step's record commits once
 * on the idempotency table although the SDK may run the step more than once. Started by the durable front door
 * (keystone-idempotency/durable), one execution per Idempotency-Key.
 */
const store = new DynamoDbStore({
  client: DynamoDBDocumentClient.from(new DynamoDBClient({})),
  tableName: requiredEnv('IDEMPOTENCY_TABLE'),
});

interface RefundRequest {
  readonly paymentId: string;
  readonly amount: number;
}

export const handler = withDurableExecution(async (event: DurableRequest<RefundRequest>, context: DurableContext) => {
  const decision = await context.waitForCallback<string>(
    'approval',
    async (callbackId) => {
      context.logger.info('refund awaiting approval', { callbackId, paymentId: event.input.paymentId });
    },
    { timeout: { days: 3 } },
  );
  return idempotentStep(
    context,
    'record-decision',
    async (step) => ({ paymentId: event.input.paymentId, decision, reference: step.downstreamKey }),
    { store },
  );
});

function requiredEnv(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}
