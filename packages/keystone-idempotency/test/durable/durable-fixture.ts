import { randomUUID } from 'node:crypto';
import { type DurableContext, withDurableExecution } from '@aws/durable-execution-sdk-js';
import { idempotentStep } from '../../src/durable/step';
import type { DynamoDbStore, EffectItem } from '../../src/dynamodb/store';
import type { IdempotencyStore } from '../../src/engine/contract';

/** An outside system that, like a payment processor, dedupes by the idempotency key it is sent. */
export class DedupingProcessor {
  readonly calls: string[] = [];
  readonly charges = new Map<string, string>();
  charge(idempotencyKey: string): string {
    this.calls.push(idempotencyKey);
    const existing = this.charges.get(idempotencyKey);
    if (existing) return existing;
    const id = `ch_${this.charges.size + 1}`;
    this.charges.set(idempotencyKey, id);
    return id;
  }
}

export interface Faults {
  /** Steps whose next attempt throws after its outside call, before it commits (a crash mid-step). */
  readonly crashAfterEffect: Set<string>;
}

export interface ApprovalResult {
  readonly orderId: string;
  readonly chargeId: string;
  readonly approvedBy: string;
}

/**
 * The durable function the tests run: reserve (a local write), wait for a person's approval (a callback that may
 * take days), charge (an outside call with the step's downstream key, and a local write). Each step counts its runs.
 */
export function approvalFunction(options: {
  store: DynamoDbStore | IdempotencyStore<EffectItem>;
  effectsTable: () => string;
  processor: DedupingProcessor;
  faults: Faults;
  runs: string[];
  invocations?: { count: number };
  /** Wait for a person's approval (a callback) between the steps. Default true; false approves at once. */
  awaitsApproval?: boolean;
}) {
  const { store, processor, faults, runs } = options;
  return withDurableExecution(async (event: { input: { orderId: string } }, context: DurableContext) => {
    if (options.invocations) options.invocations.count++;
    const { orderId } = event.input;
    const reserved = await idempotentStep<{ reservation: string }, EffectItem>(
      context,
      'reserve',
      async (step) => {
        runs.push('reserve');
        step.stage({
          Put: { TableName: options.effectsTable(), Item: { pk: `ORDER#${orderId}`, sk: `RESERVED#${randomUUID()}` } },
        });
        return { reservation: step.downstreamKey };
      },
      { store },
    );
    const approvedBy =
      options.awaitsApproval === false
        ? 'auto'
        : await context.waitForCallback<string>('approval', async () => {}, { timeout: { days: 7 } });
    const charged = await idempotentStep<{ chargeId: string; downstreamKey: string }, EffectItem>(
      context,
      'charge',
      async (step) => {
        runs.push('charge');
        const chargeId = processor.charge(step.downstreamKey);
        if (faults.crashAfterEffect.delete('charge')) throw new Error('the function crashed after the charge');
        step.stage({
          Put: {
            TableName: options.effectsTable(),
            Item: {
              pk: `ORDER#${orderId}`,
              sk: `CHARGED#${randomUUID()}`,
              chargeId,
              reservation: reserved.reservation,
            },
          },
        });
        return { chargeId, downstreamKey: step.downstreamKey };
      },
      { store, config: { retryStrategy: (_error, attempt) => ({ shouldRetry: attempt < 3, delay: { seconds: 1 } }) } },
    );
    return { orderId, chargeId: charged.chargeId, approvedBy } satisfies ApprovalResult;
  });
}
