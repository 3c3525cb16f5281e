import { randomUUID } from 'node:crypto';
import { LocalDurableTestRunner, WaitingOperationStatus } from '@aws/durable-execution-sdk-js-testing';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { EXECUTION_NAME_PATTERN, executionName } from '../../src/durable/execution-name';
import { durableExecutionStatus, durableFrontDoor } from '../../src/durable/front-door';
import { DynamoDbStore } from '../../src/dynamodb/store';
import { scopedKey } from '../../src/engine/key';
import { apiEvent } from '../support/api-event';
import { testDatabase } from '../support/dynamodb';
import { LocalDurableExecutions } from '../support/local-durable-executions';
import { approvalFunction, DedupingProcessor } from './durable-fixture';

beforeAll(() => LocalDurableTestRunner.setupTestEnvironment({ skipTime: true }));
// Every execution ends on its own or is approved by its test: none may still run when the runner stops.
afterAll(async () => {
  await LocalDurableExecutions.drain(async () => {});
  await LocalDurableTestRunner.teardownTestEnvironment();
});
// Declared after the drain: its afterAll (which closes the client) runs after the drain's.
const db = testDatabase();

async function approve(executions: LocalDurableExecutions, name: string): Promise<void> {
  const { operations, done } = executions.execution(name);
  const approval = operations.get('approval');
  if (!approval) throw new Error('approval is not watched');
  await approval.waitForData(WaitingOperationStatus.SUBMITTED);
  await approval.sendCallbackSuccess('ana');
  await done;
}

/**
 * `awaitsApproval`: the execution waits for a callback the test answers (it runs until then); otherwise it ends on
 * its own. Only the tests that watch a running execution wait: the local runner runs one execution at a time.
 */
function setup({ awaitsApproval = false } = {}) {
  const store = new DynamoDbStore({ client: db.doc, tableName: db.idempotencyTable, leaseSeconds: 960 });
  const processor = new DedupingProcessor();
  const runs: string[] = [];
  const executions = new LocalDurableExecutions(
    approvalFunction({
      store,
      effectsTable: () => db.effectsTable,
      processor,
      faults: { crashAfterEffect: new Set() },
      runs,
      awaitsApproval,
    }),
    ['approval'],
  );
  const frontDoor = durableFrontDoor({ store, executions });
  const status = durableExecutionStatus({ executions });
  const post = async (key: string | undefined, body: unknown, accountId: string | null = 'acct_1') =>
    (await frontDoor(
      apiEvent({
        resource: '/approvals',
        body,
        accountId,
        headers: key === undefined ? {} : { 'Idempotency-Key': key },
      }),
    )) as APIGatewayProxyResult;
  const get = async (location: string, accountId = 'acct_1') =>
    (await status(
      apiEvent({ method: 'GET', resource: '/executions/{id}', path: location, accountId }),
    )) as APIGatewayProxyResult;
  const nameOf = (key: string, accountId = 'acct_1') =>
    executionName(scopedKey({ accountId, operation: 'POST /approvals', key }));
  return {
    store,
    processor,
    runs,
    executions,
    post,
    get,
    nameOf,
    approve: (name: string) => approve(executions, name),
  };
}

const json = (response: APIGatewayProxyResult) => JSON.parse(response.body) as Record<string, unknown>;

describe('executionName', () => {
  it('derives a name Lambda accepts from any key, without truncating it', () => {
    const long = scopedKey({ accountId: 'acct_1', operation: 'POST /approvals', key: 'x'.repeat(255) });
    const other = scopedKey({ accountId: 'acct_1', operation: 'POST /approvals', key: `${'x'.repeat(254)}y` });
    const emoji = scopedKey({ accountId: 'acct_ü', operation: 'POST /approvals', key: 'k|🙂 "quoted"' });
    for (const key of [long, other, emoji]) expect(executionName(key)).toMatch(EXECUTION_NAME_PATTERN);
    expect(executionName(long)).not.toBe(executionName(other));
    expect(executionName(long)).toBe(executionName(long));
  });
});

describe('durableFrontDoor', () => {
  it('answers 202 and a status URL while the execution runs, and its result once it is done', async () => {
    const { post, get, executions, nameOf, approve, runs } = setup({ awaitsApproval: true });
    const key = randomUUID();
    const orderId = randomUUID();

    const first = await post(key, { orderId, note: 'rush' });
    expect(first.statusCode).toBe(202);
    const location = first.headers?.Location as string;
    expect(location).toMatch(/^\/executions\/[A-Za-z0-9_-]+$/);
    expect(json(first)).toEqual({ status: 'running', statusUrl: location });

    // A retry, its body re-rendered (members reordered): the same execution, described again; nothing new starts.
    const again = await post(key, { note: 'rush', orderId });
    expect(again.statusCode).toBe(202);
    expect(again.headers?.Location).toBe(location);
    expect(again.headers?.['Idempotent-Replayed']).toBe('true');
    expect(executions.executionsStarted).toBe(1);
    expect((await get(location)).statusCode).toBe(202);

    await approve(nameOf(key));

    const done = await post(key, { orderId, note: 'rush' });
    expect(done.statusCode).toBe(200);
    expect(json(done)).toEqual({ orderId, chargeId: 'ch_1', approvedBy: 'ana' });
    const polled = await get(location);
    expect(polled.statusCode).toBe(200);
    expect(json(polled)).toEqual(json(done));
    expect(executions.executionsStarted).toBe(1);
    expect(runs).toEqual(['reserve', 'charge']);
  });

  it('answers 422 for the key with another body, and starts nothing', async () => {
    const { post, executions } = setup();
    const key = randomUUID();
    expect([200, 202]).toContain((await post(key, { orderId: 'o-1' })).statusCode);

    const reused = await post(key, { orderId: 'o-2' });

    expect(reused.statusCode).toBe(422);
    expect(reused.headers?.['Content-Type']).toBe('application/problem+json');
    expect(json(reused).type).toBe('https://keystone-idempotency.dev/problems/idempotency-key-reused');
    expect(executions.executionsStarted).toBe(1);
  });

  it('answers 422 when Lambda already holds the name with another payload (our record of the key expired)', async () => {
    const { post, executions, nameOf } = setup();
    const key = randomUUID();
    await executions.start({ name: nameOf(key), payload: JSON.stringify({ input: { orderId: 'earlier' } }) });

    const response = await post(key, { orderId: 'now' });

    expect(response.statusCode).toBe(422);
    expect(json(response).type).toMatch(/idempotency-key-reused$/);
  });

  it.each([
    ['missing', undefined, 'idempotency-key-missing'],
    ['empty', '', 'idempotency-key-invalid'],
    ['not visible ASCII', 'key with spaces', 'idempotency-key-invalid'],
    ['too long', 'k'.repeat(256), 'idempotency-key-invalid'],
  ])('answers 400 for a %s key, as problem+json, and starts nothing', async (_what, key, slug) => {
    const { post, executions } = setup();
    const response = await post(key, { orderId: 'o-1' });
    expect(response.statusCode).toBe(400);
    expect(response.headers?.['Content-Type']).toBe('application/problem+json');
    expect(json(response).type).toBe(`https://keystone-idempotency.dev/problems/${slug}`);
    expect(executions.startRequests).toEqual([]);
  });

  it('answers 400 for a body that is not JSON, and 401 without an account', async () => {
    const { post, executions } = setup();
    const bad = await post(randomUUID(), '{"orderId":');
    expect(bad.statusCode).toBe(400);
    expect(json(bad).type).toMatch(/invalid-body$/);
    expect((await post(randomUUID(), { orderId: 'o' }, null)).statusCode).toBe(401);
    expect(executions.startRequests).toEqual([]);
  });

  it('starts one execution when the commit after the start is lost and the client retries', async () => {
    const { store, post, executions } = setup();
    const commit = store.commit.bind(store);
    let failNext = true;
    store.commit = async (...args) => {
      if (failNext) {
        failNext = false;
        throw new Error('DynamoDB unreachable');
      }
      return commit(...args);
    };
    const key = randomUUID();

    await expect(post(key, { orderId: 'o-lost' })).rejects.toThrow('DynamoDB unreachable');
    const retry = await post(key, { orderId: 'o-lost' });

    expect([200, 202]).toContain(retry.statusCode);
    expect(executions.startRequests).toHaveLength(2);
    expect(executions.executionsStarted).toBe(1);
  });

  it("shows an execution's status to the account that started it only", async () => {
    const { post, get } = setup();
    const location = (await post(randomUUID(), { orderId: 'o-mine' })).headers?.Location as string;
    expect((await get(location, 'acct_2')).statusCode).toBe(404);
    expect((await get('/executions/bm90LWFuLWFybg')).statusCode).toBe(404);
  });

  it('keeps two accounts with one key apart', async () => {
    const { post, executions } = setup();
    const key = randomUUID();
    expect([200, 202]).toContain((await post(key, { orderId: 'o-a' }, 'acct_a')).statusCode);
    expect([200, 202]).toContain((await post(key, { orderId: 'o-b' }, 'acct_b')).statusCode);
    expect(executions.executionsStarted).toBe(2);
  });
});
