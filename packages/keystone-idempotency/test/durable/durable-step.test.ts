import { randomUUID } from 'node:crypto';
import { LocalDurableTestRunner, WaitingOperationStatus } from '@aws/durable-execution-sdk-js-testing';
import { DynamoDbStore, type EffectItem } from '../../src/dynamodb/store';
import type { IdempotencyStore } from '../../src/engine/contract';
import { testDatabase } from '../support/dynamodb';
import { approvalFunction, DedupingProcessor, type Faults } from './durable-fixture';

const db = testDatabase();

beforeAll(() => LocalDurableTestRunner.setupTestEnvironment({ skipTime: true }));
afterAll(() => LocalDurableTestRunner.teardownTestEnvironment());

function setup(wrapStore: (store: DynamoDbStore) => IdempotencyStore<EffectItem> = (store) => store) {
  // A lease longer than the local runner's invocation (15 minutes), which each claim's lease must cover.
  const store = new DynamoDbStore({ client: db.doc, tableName: db.idempotencyTable, leaseSeconds: 960 });
  const processor = new DedupingProcessor();
  const faults: Faults = { crashAfterEffect: new Set() };
  const runs: string[] = [];
  const invocations = { count: 0 };
  const handler = approvalFunction({
    store: wrapStore(store),
    effectsTable: () => db.effectsTable,
    processor,
    faults,
    runs,
    invocations,
  });
  const runner = new LocalDurableTestRunner({ handlerFunction: handler });
  const orderId = randomUUID();
  /** Runs the execution to its end, approving it once its callback is submitted. */
  const runApproved = async () => {
    const done = runner.run({ payload: { input: { orderId } } });
    const approval = runner.getOperation('approval');
    await approval.waitForData(WaitingOperationStatus.SUBMITTED);
    await approval.sendCallbackSuccess('ana');
    return done;
  };
  return { store, processor, faults, runs, invocations, runner, orderId, runApproved };
}

describe('idempotentStep', () => {
  it('runs each step once across the replays a callback causes', async () => {
    const { runs, processor, invocations, orderId, runApproved } = setup();

    const execution = await runApproved();

    expect(execution.getStatus()).toBe('SUCCEEDED');
    expect(execution.getResult()).toEqual({ orderId, chargeId: 'ch_1', approvedBy: 'ana' });
    // The callback suspended the function and the approval replayed it from the top: the steps did not run again.
    expect(invocations.count).toBeGreaterThan(1);
    expect(runs).toEqual(['reserve', 'charge']);
    expect(processor.calls).toHaveLength(1);
    expect(await db.itemsUnder(`ORDER#${orderId}`)).toBe(2);
  });

  it('retries a step that crashed after its outside call under the same downstream key, committing once', async () => {
    const { runs, processor, faults, orderId, runApproved, runner } = setup();
    faults.crashAfterEffect.add('charge');

    const execution = await runApproved();

    expect(execution.getStatus()).toBe('SUCCEEDED');
    // The SDK ran the charge step twice (at least once per retry); the processor saw one key twice and charged once.
    expect(runs).toEqual(['reserve', 'charge', 'charge']);
    expect(processor.calls).toHaveLength(2);
    expect(new Set(processor.calls).size).toBe(1);
    expect(processor.charges.size).toBe(1);
    expect(runner.getOperation('charge').getStepDetails()?.attempt).toBeGreaterThanOrEqual(1);
    // The crashed attempt wrote nothing; the retry's writes committed once.
    expect(await db.itemsUnder(`ORDER#${orderId}`)).toBe(2);
    expect(execution.getResult()?.chargeId).toBe('ch_1');
  });

  it('replays a step whose commit landed before a crash, without running its work again', async () => {
    // The commit reaches DynamoDB, then the function dies before the SDK checkpoints the step (here: the reply to the
    // commit is lost once, which the step sees as a failure and the SDK retries).
    let loseNextCommitReply = true;
    const { runs, processor, orderId, runApproved } = setup((store) =>
      Object.assign(Object.create(store) as DynamoDbStore, {
        commit: async (...args: Parameters<DynamoDbStore['commit']>) => {
          await store.commit(...args);
          if (args[0].key.length > 0 && loseNextCommitReply && runs.includes('charge')) {
            loseNextCommitReply = false;
            throw new Error('the function died after the commit');
          }
        },
      }),
    );

    const execution = await runApproved();

    expect(execution.getStatus()).toBe('SUCCEEDED');
    expect(loseNextCommitReply).toBe(false);
    expect(runs).toEqual(['reserve', 'charge']);
    expect(processor.calls).toHaveLength(1);
    expect(await db.itemsUnder(`ORDER#${orderId}`)).toBe(2);
    expect(execution.getResult()?.chargeId).toBe('ch_1');
  });

  it('gives every step its own downstream key, the same on every attempt', async () => {
    const first = setup();
    const second = setup();
    first.faults.crashAfterEffect.add('charge');
    const [a, b] = [await first.runApproved(), await second.runApproved()];
    const keyOf = (execution: typeof a): string => {
      const result = execution
        .getOperations()
        .find((op) => op.getName() === 'charge')
        ?.getStepDetails()?.result;
      return (result as { downstreamKey: string } | undefined)?.downstreamKey ?? 'none';
    };
    expect(keyOf(a)).toMatch(/^dstep_[A-Za-z0-9_-]{43}$/);
    expect(first.processor.calls).toEqual([keyOf(a), keyOf(a)]);
    expect(keyOf(a)).not.toBe(keyOf(b));
    expect(first.runner.getOperation('reserve').getStepDetails()?.result).not.toEqual({ reservation: keyOf(a) });
  });
});
