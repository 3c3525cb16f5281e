import { randomUUID } from 'node:crypto';
import { LocalDurableTestRunner } from '@aws/durable-execution-sdk-js-testing';
import { FullBatchFailureError } from '@aws-lambda-powertools/batch';
import type { SQSRecord } from 'aws-lambda';
import type { DurableExecutions } from '../../src/durable/executions';
import { makeSqsDurableDispatcher } from '../../src/durable/sqs-dispatcher';
import { DynamoDbStore } from '../../src/dynamodb/store';
import { byBodyField } from '../../src/sqs/record-key';
import { lambdaContext, sqsEvent, sqsRecord } from '../sqs/sqs-events';
import { testDatabase } from '../support/dynamodb';
import { LocalDurableExecutions } from '../support/local-durable-executions';
import { approvalFunction, DedupingProcessor } from './durable-fixture';

beforeAll(() => LocalDurableTestRunner.setupTestEnvironment({ skipTime: true }));
// The executions end on their own (no approval to wait for): none may still run when the runner stops.
afterAll(async () => {
  await LocalDurableExecutions.drain(async () => {});
  await LocalDurableTestRunner.teardownTestEnvironment();
});
// Declared after the drain: its afterAll (which closes the client) runs after the drain's.
const db = testDatabase();

const quiet = { warn: () => {} };

function setup(options: { key?: Parameters<typeof makeSqsDurableDispatcher>[0]['key'] } = {}) {
  const store = new DynamoDbStore({ client: db.doc, tableName: db.idempotencyTable, leaseSeconds: 960 });
  const executions = new LocalDurableExecutions(
    approvalFunction({
      store,
      effectsTable: () => db.effectsTable,
      processor: new DedupingProcessor(),
      faults: { crashAfterEffect: new Set() },
      runs: [],
      awaitsApproval: false,
    }),
  );
  /** Lambda throttling the next start of these messages' executions. */
  const throttled = new Set<string>();
  const flaky: DurableExecutions = {
    start: async (request) => {
      if (throttled.delete(JSON.parse(request.payload).input.orderId)) {
        throw Object.assign(new Error('Rate exceeded'), { name: 'TooManyRequestsException' });
      }
      return executions.start(request);
    },
    describe: (arn) => executions.describe(arn),
  };
  const dispatch = makeSqsDurableDispatcher({ executions: flaky, name: 'approvals', logger: quiet, ...options });
  const deliver = (...records: SQSRecord[]) => dispatch(sqsEvent(...records), lambdaContext(30_000));
  return { executions, throttled, deliver };
}

const order = (orderId = randomUUID(), extra: Record<string, unknown> = {}) =>
  sqsRecord({ body: { orderId, ...extra } });

describe('makeSqsDurableDispatcher', () => {
  it('starts one execution per message, however often the batch is delivered', async () => {
    const { executions, deliver } = setup();
    const batch = [order(), order()];

    expect(await deliver(...batch)).toEqual({ batchItemFailures: [] });
    expect(await deliver(...batch)).toEqual({ batchItemFailures: [] });

    expect(executions.startRequests).toHaveLength(4);
    expect(executions.executionsStarted).toBe(2);
  });

  it('starts one execution per business key, for a message re-sent with a new message id', async () => {
    const { executions, deliver } = setup({ key: byBodyField('orderId') });
    const orderId = randomUUID();

    await deliver(order(orderId));
    expect(await deliver(order(orderId))).toEqual({ batchItemFailures: [] });

    expect(executions.executionsStarted).toBe(1);
  });

  it('reports only the records whose start failed, and starts them when they come back', async () => {
    const { executions, throttled, deliver } = setup();
    const [ok, unlucky] = [order(), order()];
    throttled.add(JSON.parse(unlucky.body).orderId);

    expect(await deliver(ok, unlucky)).toEqual({ batchItemFailures: [{ itemIdentifier: unlucky.messageId }] });
    expect(await deliver(unlucky)).toEqual({ batchItemFailures: [] });

    expect(executions.executionsStarted).toBe(2);
  });

  it('fails a record with no usable key, and one whose key names an execution with another payload', async () => {
    const { executions, deliver } = setup({ key: byBodyField('orderId') });
    const orderId = randomUUID();
    const notJson = sqsRecord({ body: 'not json' });
    const first = order(orderId, { qty: 1 });
    const changed = order(orderId, { qty: 2 });

    expect(await deliver(first, notJson)).toEqual({ batchItemFailures: [{ itemIdentifier: notJson.messageId }] });
    // A batch whose every record failed throws (Powertools' FullBatchFailureError): the whole batch comes back.
    await expect(deliver(changed)).rejects.toThrow(FullBatchFailureError);

    expect(executions.executionsStarted).toBe(1);
  });
});
