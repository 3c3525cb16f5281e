import { randomUUID } from 'node:crypto';
import { type DurableContext, withDurableExecution } from '@aws/durable-execution-sdk-js';
import { LocalDurableTestRunner, WaitingOperationStatus } from '@aws/durable-execution-sdk-js-testing';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  type DynamoDbFaultProxy,
  DynamoDbTarget,
  startDynamoDbFaultProxy,
} from '@keystone-idempotency/local-aws/dynamodb-fault-proxy';
import { idempotentStep } from '../../src/durable/step';
import { DynamoDbStore } from '../../src/dynamodb/store';
import type { Clock } from '../../src/engine/clock';
import type { IdempotencyStore } from '../../src/engine/contract';
import { RecordStatus } from '../../src/engine/record';
import { localClient, localDocumentClient, testDatabase } from '../support/dynamodb';
import { testPostgres } from '../support/postgres';
import { DedupingProcessor } from './durable-fixture';

/**
 * A step's claim is the SDK's own step: its place in the execution's tree of contexts. Items of a map, parallel
 * branches and child contexts that use one name are different steps, each with its own claim and downstream key; one
 * name twice in one context is refused.
 */

const db = testDatabase();
const pg = testPostgres();

beforeAll(() => LocalDurableTestRunner.setupTestEnvironment({ skipTime: true }));
afterAll(() => LocalDurableTestRunner.teardownTestEnvironment());

interface Subject {
  readonly name: string;
  /** A lease longer than the local runner's invocation (15 minutes), which each claim's lease must cover. */
  store(clock: Clock): IdempotencyStore<unknown>;
  /** One effect row under `pk`. */
  effect(pk: string, sk: string): unknown;
  rowsUnder(pk: string): Promise<number>;
}

const subjects: Subject[] = [
  {
    name: 'DynamoDB',
    store: (clock) =>
      new DynamoDbStore({
        client: db.doc,
        tableName: db.idempotencyTable,
        leaseSeconds: 960,
        clock,
      }) as IdempotencyStore<unknown>,
    effect: (pk, sk) => ({ Put: { TableName: db.effectsTable, Item: { pk, sk } } }),
    rowsUnder: (pk) => db.itemsUnder(pk),
  },
  {
    name: 'PostgreSQL',
    store: (clock) => pg.store({ leaseSeconds: 960, clock }) as IdempotencyStore<unknown>,
    effect: (pk, sk) => ({ text: `INSERT INTO ${pg.effectsTable} (pk, sk) VALUES ($1, $2)`, values: [pk, sk] }),
    rowsUnder: (pk) => pg.rowsUnder(pk),
  },
];

interface Charged {
  readonly orderId: string;
  readonly chargeId: string;
  readonly downstreamKey: string;
  /** The step's claim on the store. */
  readonly key: string;
  readonly operationId: string;
}

/** How a step's attempt for an order ends, once (the next attempt runs normally). */
interface Faults {
  /** Throws after the charge, before its commit: the claim is released and the SDK retries the step. */
  readonly throwAfterCharge: Set<string>;
  /**
   * Dies after the charge: no commit and no release, so the claim stays held until its lease runs out, which it does
   * while the SDK waits to retry the step (`StepInFlightError`).
   */
  readonly dieAfterCharge: Set<string>;
  /** Dies after the commit landed, before the SDK checkpointed the step's result. */
  readonly dieAfterCommit: Set<string>;
}

/**
 * An order service's pieces: a deduping processor, a store whose owner can die at the points `faults` names, and
 * `charge(ctx, orderId, name)`, one idempotent step that charges an order and writes its row.
 */
function world(subject: Subject) {
  const processor = new DedupingProcessor();
  /** The orders whose step's work ran, once per run. */
  const runs: string[] = [];
  const faults: Faults = { throwAfterCharge: new Set(), dieAfterCharge: new Set(), dieAfterCommit: new Set() };
  const dying = { beforeRelease: new Set<string>(), afterCommit: new Set<string>(), held: new Set<string>() };
  // The store's time, moved on by the lease a held claim has left when a retry finds it: the wait the SDK makes.
  const clock = { skewMs: 0, now: () => Date.now() + clock.skewMs };
  const base = subject.store(clock);
  // The store, but a process that died never releases its claim, and one that died after its commit never heard it.
  const store = new Proxy(base, {
    get(target, property) {
      if (property === 'claim') {
        return async (...args: Parameters<IdempotencyStore<unknown>['claim']>) => {
          const claimed = await target.claim(...args);
          if (claimed.kind === 'in_flight' && dying.held.delete(args[0])) clock.skewMs += claimed.leaseRemainingMs + 1;
          return claimed;
        };
      }
      if (property === 'release') {
        return async (...args: Parameters<IdempotencyStore<unknown>['release']>) =>
          dying.beforeRelease.delete(args[0].key) ? false : target.release(...args);
      }
      if (property === 'commit') {
        return async (...args: Parameters<IdempotencyStore<unknown>['commit']>) => {
          await target.commit(...args);
          if (dying.afterCommit.delete(args[0].key)) throw new Error('the function died after the commit');
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const charge = (context: DurableContext, orderId: string, name = 'charge') =>
    idempotentStep<Charged, unknown>(
      context,
      name,
      async (step) => {
        runs.push(orderId);
        const chargeId = processor.charge(step.downstreamKey);
        if (faults.throwAfterCharge.delete(orderId)) throw new Error('the function failed after the charge');
        if (faults.dieAfterCharge.delete(orderId)) {
          dying.beforeRelease.add(step.key);
          dying.held.add(step.key);
          throw new Error('the function died after the charge');
        }
        if (faults.dieAfterCommit.delete(orderId)) dying.afterCommit.add(step.key);
        step.stage(subject.effect(`ORDER#${orderId}`, `CHARGED#${chargeId}`));
        return { orderId, chargeId, downstreamKey: step.downstreamKey, key: step.key, operationId: step.operationId };
      },
      { store, config: { retryStrategy: (_error, attempt) => ({ shouldRetry: attempt < 3, delay: { seconds: 1 } }) } },
    );
  /** What the store and the effects table hold for these charges: one completed claim and one row per order. */
  const settled = async (charged: readonly Charged[]) => ({
    claims: await Promise.all(charged.map(async ({ key }) => (await base.get(key))?.status)),
    rows: await Promise.all(charged.map(({ orderId }) => subject.rowsUnder(`ORDER#${orderId}`))),
  });
  return { processor, runs, faults, charge, settled, clock };
}

const newOrders = (count: number) => Array.from({ length: count }, () => `o-${randomUUID().slice(0, 8)}`);
const distinct = <T>(values: readonly T[]) => new Set(values).size;

describe.each(subjects)('idempotentStep on $name', (subject) => {
  it('charges each order of a map under one step name once, with its own claim and charge id', async () => {
    const { processor, runs, charge, settled } = world(subject);
    const orders = newOrders(3);
    const handler = withDurableExecution(async (event: { orders: string[] }, context: DurableContext) => {
      const batch = await context.map(event.orders, (item, orderId) => charge(item, orderId), { maxConcurrency: 3 });
      return batch.getResults();
    });

    const execution = await new LocalDurableTestRunner({ handlerFunction: handler }).run({ payload: { orders } });

    expect(execution.getStatus()).toBe('SUCCEEDED');
    const charged = execution.getResult() as Charged[];
    expect(charged.map((c) => c.orderId)).toEqual(orders);
    expect(distinct(charged.map((c) => c.chargeId))).toBe(3);
    expect(distinct(charged.map((c) => c.key))).toBe(3);
    expect(distinct(charged.map((c) => c.downstreamKey))).toBe(3);
    expect([...runs].sort()).toEqual([...orders].sort());
    expect(processor.charges.size).toBe(3);
    expect(await settled(charged)).toEqual({ claims: Array(3).fill(RecordStatus.Completed), rows: [1, 1, 1] });
    // Each claim is the SDK's own step: the operations the execution's history holds under that name.
    const steps = execution.getOperations().filter((op) => op.getName() === 'charge');
    expect(charged.map((c) => c.operationId).sort()).toEqual(steps.map((op) => op.getId()).sort());
  });

  it('gives the steps of one map item a claim each', async () => {
    const { processor, charge } = world(subject);
    const handler = withDurableExecution(async (event: { orders: string[] }, context: DurableContext) => {
      const batch = await context.map(event.orders, async (item, orderId) => [
        await charge(item, orderId),
        await charge(item, `${orderId}-fee`, 'fee'),
      ]);
      return batch.getResults().flat();
    });

    const execution = await new LocalDurableTestRunner({ handlerFunction: handler }).run({
      payload: { orders: newOrders(2) },
    });

    expect(execution.getStatus()).toBe('SUCCEEDED');
    expect(distinct((execution.getResult() as Charged[]).map((c) => c.key))).toBe(4);
    expect(processor.charges.size).toBe(4);
  });

  it('gives parallel branches under one step name a claim each', async () => {
    const { processor, charge, settled } = world(subject);
    const [first, second] = newOrders(2) as [string, string];
    const handler = withDurableExecution(async (_event: unknown, context: DurableContext) => {
      const batch = await context.parallel([(branch) => charge(branch, first), (branch) => charge(branch, second)]);
      return batch.getResults();
    });

    const execution = await new LocalDurableTestRunner({ handlerFunction: handler }).run({ payload: {} });

    expect(execution.getStatus()).toBe('SUCCEEDED');
    const charged = execution.getResult() as Charged[];
    expect(charged.map((c) => c.orderId)).toEqual([first, second]);
    expect(distinct(charged.map((c) => c.chargeId))).toBe(2);
    expect(distinct(charged.map((c) => c.key))).toBe(2);
    expect(processor.charges.size).toBe(2);
    expect(await settled(charged)).toEqual({ claims: Array(2).fill(RecordStatus.Completed), rows: [1, 1] });
  });

  it("gives a child context's step its own claim under its parent's step name", async () => {
    const { processor, charge, settled } = world(subject);
    const [parent, child, grandchild] = newOrders(3) as [string, string, string];
    const handler = withDurableExecution(async (_event: unknown, context: DurableContext) => {
      const outer = await charge(context, parent);
      const inner = await context.runInChildContext('deposit', async (nested) => [
        await charge(nested, child),
        await nested.runInChildContext('fee', (deeper) => charge(deeper, grandchild)),
      ]);
      return [outer, ...inner];
    });

    const execution = await new LocalDurableTestRunner({ handlerFunction: handler }).run({ payload: {} });

    expect(execution.getStatus()).toBe('SUCCEEDED');
    const charged = execution.getResult() as Charged[];
    expect(charged.map((c) => c.orderId)).toEqual([parent, child, grandchild]);
    expect(distinct(charged.map((c) => c.chargeId))).toBe(3);
    expect(distinct(charged.map((c) => c.downstreamKey))).toBe(3);
    expect(processor.charges.size).toBe(3);
    expect(await settled(charged)).toEqual({ claims: Array(3).fill(RecordStatus.Completed), rows: [1, 1, 1] });
  });

  it('gives the same steps of two executions different claims', async () => {
    const { charge } = world(subject);
    const handler = withDurableExecution(async (event: { orders: string[] }, context: DurableContext) => {
      const batch = await context.map(event.orders, (item, orderId) => charge(item, orderId));
      return [await charge(context, event.orders[0] ?? 'none', 'settle'), ...batch.getResults()];
    });
    const run = async () =>
      (
        await new LocalDurableTestRunner({ handlerFunction: handler }).run({ payload: { orders: newOrders(2) } })
      ).getResult() as Charged[];

    const [a, b] = [await run(), await run()];

    expect(distinct([...a, ...b].map((c) => c.key))).toBe(6);
    expect(distinct([...a, ...b].map((c) => c.downstreamKey))).toBe(6);
  });

  it('refuses one name twice in one context, before the second step runs', async () => {
    const { processor, runs, charge } = world(subject);
    const [first, second] = newOrders(2) as [string, string];
    const handler = withDurableExecution(async (_event: unknown, context: DurableContext) => {
      await charge(context, first);
      return charge(context, second);
    });

    const execution = await new LocalDurableTestRunner({ handlerFunction: handler }).run({ payload: {} });

    expect(execution.getStatus()).toBe('FAILED');
    expect(execution.getError().errorType).toBe('DuplicateStepNameError');
    expect(runs).toEqual([first]);
    expect(processor.calls).toHaveLength(1);
  });

  it('takes the steps a callback replays for replays, not for one name used twice', async () => {
    const { processor, runs, charge } = world(subject);
    const [first, second] = newOrders(2) as [string, string];
    let invocations = 0;
    const handler = withDurableExecution(async (event: { orders: string[] }, context: DurableContext) => {
      invocations++;
      const before = await charge(context, first);
      const batch = await context.map(event.orders, (item, orderId) => charge(item, orderId));
      await context.waitForCallback<string>('approval', async () => {}, { timeout: { days: 1 } });
      return [before, ...batch.getResults(), await charge(context, second, 'settle')];
    });
    const runner = new LocalDurableTestRunner({ handlerFunction: handler });
    const approval = runner.getOperation('approval');

    const done = runner.run({ payload: { orders: [first, second] } });
    await approval.waitForData(WaitingOperationStatus.SUBMITTED);
    await approval.sendCallbackSuccess('ana');
    const execution = await done;

    expect(execution.getStatus()).toBe('SUCCEEDED');
    // The approval replayed the function from the top: every step was called again, in a new context, and replayed.
    expect(invocations).toBeGreaterThan(1);
    expect([...runs].sort()).toEqual([first, first, second, second].sort());
    expect(processor.charges.size).toBe(4);
  });

  it('lets each step of a map that crashed find its own claim on the retry', async () => {
    const { processor, runs, faults, charge, settled, clock } = world(subject);
    const [committed, held, released] = newOrders(3) as [string, string, string];
    faults.dieAfterCommit.add(committed);
    faults.dieAfterCharge.add(held);
    faults.throwAfterCharge.add(released);
    const handler = withDurableExecution(async (event: { orders: string[] }, context: DurableContext) => {
      // One item at a time: the store's time moves on for the held claim alone.
      const batch = await context.map(event.orders, (item, orderId) => charge(item, orderId), { maxConcurrency: 1 });
      return batch.getResults();
    });

    const execution = await new LocalDurableTestRunner({ handlerFunction: handler }).run({
      payload: { orders: [committed, held, released] },
    });

    expect(execution.getStatus()).toBe('SUCCEEDED');
    const charged = execution.getResult() as Charged[];
    expect(charged.map((c) => c.orderId)).toEqual([committed, held, released]);
    // The held claim was found in flight, and taken over once its lease had run out.
    expect(clock.skewMs).toBeGreaterThan(900_000);
    // The step whose commit landed replayed it on the retry without running again; the other two ran again and
    // charged under the key their first attempt used: the processor charged each order once.
    expect(runs.filter((order) => order === committed)).toHaveLength(1);
    expect(runs.filter((order) => order === held)).toHaveLength(2);
    expect(runs.filter((order) => order === released)).toHaveLength(2);
    expect(processor.calls.filter((key) => key === charged[1]?.downstreamKey)).toHaveLength(2);
    expect(processor.calls.filter((key) => key === charged[2]?.downstreamKey)).toHaveLength(2);
    expect(processor.charges.size).toBe(3);
    expect(distinct(charged.map((c) => c.chargeId))).toBe(3);
    expect(charged.map((c) => processor.charges.get(c.downstreamKey))).toEqual(charged.map((c) => c.chargeId));
    expect(await settled(charged)).toEqual({ claims: Array(3).fill(RecordStatus.Completed), rows: [1, 1, 1] });
  });
});

describe('idempotentStep names', () => {
  const subject = subjects[0] as Subject;

  it.each([
    ['empty', ''],
    ['257 characters', 'c'.repeat(257)],
    ['a NUL', 'charge\u0000'],
    ['a lone surrogate', 'charge\uD800'],
    ['U+FFFD', 'charge\uFFFD'],
    ['a letter outside ASCII', 'chargé'],
    ['a newline', 'charge\n'],
  ])('refuses a name Lambda would refuse (%s) before anything runs', async (_case, name) => {
    const { processor, runs, charge } = world(subject);
    const handler = withDurableExecution(async (_event: unknown, context: DurableContext) =>
      charge(context, 'o-1', name),
    );

    const execution = await new LocalDurableTestRunner({ handlerFunction: handler }).run({ payload: {} });

    expect(execution.getStatus()).toBe('FAILED');
    expect(execution.getError().errorType).toBe('StepUsageError');
    expect(runs).toEqual([]);
    expect(processor.calls).toEqual([]);
  });

  it('takes any printable ASCII up to 256 characters, separators included, each name its own step', async () => {
    const { processor, charge } = world(subject);
    const names = ['c'.repeat(256), 'charge|1', 'charge:1', '{charge}1', 'charge 1', '~`!@#$%^&*()'];
    const handler = withDurableExecution(async (_event: unknown, context: DurableContext) => {
      const charged: Charged[] = [];
      for (const [index, name] of names.entries()) charged.push(await charge(context, `o-${index}`, name));
      return charged;
    });

    const execution = await new LocalDurableTestRunner({ handlerFunction: handler }).run({ payload: {} });

    expect(execution.getStatus()).toBe('SUCCEEDED');
    expect(distinct((execution.getResult() as Charged[]).map((c) => c.key))).toBe(names.length);
    expect(processor.charges.size).toBe(names.length);
  });
});

describe("idempotentStep given a context that is not the SDK's", () => {
  it('refuses it before anything runs, rather than key the step by something else', async () => {
    const { processor, runs, charge } = world(subjects[0] as Subject);
    const handler = withDurableExecution(async (_event: unknown, context: DurableContext) => {
      // A wrapper that passes on the public members only (a logger added, say).
      const wrapped: DurableContext = Object.assign(Object.create(null), {
        step: context.step.bind(context),
        executionContext: context.executionContext,
        lambdaContext: context.lambdaContext,
      });
      return charge(wrapped, 'o-1');
    });

    const execution = await new LocalDurableTestRunner({ handlerFunction: handler }).run({ payload: {} });

    expect(execution.getStatus()).toBe('FAILED');
    expect(execution.getError().errorType).toBe('StepIdentityError');
    expect(runs).toEqual([]);
    expect(processor.calls).toEqual([]);
  });
});

describe('idempotentStep in a map, its commit reply lost on the wire', () => {
  let proxy: DynamoDbFaultProxy;
  let proxied: DynamoDBClient | undefined;
  beforeAll(async () => {
    proxy = await startDynamoDbFaultProxy(process.env.DYNAMODB_ENDPOINT!);
  });
  afterAll(async () => {
    proxied?.destroy();
    await proxy?.close();
  });

  it("recognises its own commit, and no item gets another's", async () => {
    proxied = localClient({ endpoint: proxy.url });
    const throughProxy: Subject = {
      ...(subjects[0] as Subject),
      store: (clock) =>
        new DynamoDbStore({
          client: localDocumentClient(proxied),
          tableName: db.idempotencyTable,
          leaseSeconds: 960,
          clock,
        }) as IdempotencyStore<unknown>,
    };
    const { processor, runs, charge, settled } = world(throughProxy);
    const orders = newOrders(3);
    const lost = proxy.arm({
      match: {
        name: `the commit of ${orders[1]}'s charge`,
        target: DynamoDbTarget.TransactWriteItems,
        when: (body) => JSON.stringify(body).includes(`ORDER#${orders[1]}`),
      },
      fault: { mode: 'drop-reply' },
      count: 1,
    });
    const handler = withDurableExecution(async (event: { orders: string[] }, context: DurableContext) => {
      const batch = await context.map(event.orders, (item, orderId) => charge(item, orderId));
      return batch.getResults();
    });

    const execution = await new LocalDurableTestRunner({ handlerFunction: handler }).run({ payload: { orders } });

    expect(lost.fired()).toBe(1);
    expect(execution.getStatus()).toBe('SUCCEEDED');
    const charged = execution.getResult() as Charged[];
    expect(charged.map((c) => c.orderId)).toEqual(orders);
    expect(distinct(charged.map((c) => c.chargeId))).toBe(3);
    expect([...runs].sort()).toEqual([...orders].sort());
    expect(processor.charges.size).toBe(3);
    expect(await settled(charged)).toEqual({ claims: Array(3).fill(RecordStatus.Completed), rows: [1, 1, 1] });
  });
});
