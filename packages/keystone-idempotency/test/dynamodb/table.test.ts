import { randomUUID } from 'node:crypto';
import {
  CreateTableCommand,
  DeleteTableCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import { DynamoDbStore, idempotencyTableRequests } from 'keystone-idempotency/dynamodb';
import { localClient, localDocumentClient } from '../support/dynamodb';
import { FakeClock } from '../support/fake-clock';

const client = localClient();
const tables: string[] = [];
afterAll(async () => {
  await Promise.all(tables.map((TableName) => client.send(new DeleteTableCommand({ TableName }))));
  client.destroy();
});

/** Makes the table the way a team without CDK would: the package's two requests, sent as they are. */
async function createFromRequests(options?: { recoveryIndex?: boolean }): Promise<string> {
  const tableName = `plain-${randomUUID().slice(0, 8)}`;
  const { createTable, timeToLive } = idempotencyTableRequests(tableName, options);
  await client.send(new CreateTableCommand(createTable));
  tables.push(tableName);
  await waitUntilTableExists({ client, maxWaitTime: 60 }, { TableName: tableName });
  await client.send(new UpdateTimeToLiveCommand(timeToLive));
  return tableName;
}

describe('idempotencyTableRequests', () => {
  it('makes a table the store claims, commits, replays and recovers on', async () => {
    const tableName = await createFromRequests();
    const clock = new FakeClock(Date.now());
    const store = new DynamoDbStore({ client: localDocumentClient(client), tableName, leaseSeconds: 30, clock });

    const claimed = await store.claim('acct|POST /orders|order-42', 'print', { recoverable: true });
    if (claimed.kind !== 'acquired') throw new Error(`expected to acquire, got ${claimed.kind}`);
    clock.advance(30_001);
    // Found through the recovery index: the table has it.
    expect((await store.findDue()).map((due) => due.key)).toEqual(['acct|POST /orders|order-42']);
    const resumed = await store.resume('acct|POST /orders|order-42');
    if (resumed.kind !== 'acquired') throw new Error(`expected to resume, got ${resumed.kind}`);
    await store.commit(resumed.lease, { statusCode: 201, body: '{}', headers: {} });
    expect((await store.claim('acct|POST /orders|order-42', 'print')).kind).toBe('replay');

    const ttl = await client.send(new DescribeTimeToLiveCommand({ TableName: tableName }));
    expect(ttl.TimeToLiveDescription).toMatchObject({ AttributeName: 'expiresAt', TimeToLiveStatus: 'ENABLED' });
  });

  it('leaves the recovery index out when asked', async () => {
    const tableName = await createFromRequests({ recoveryIndex: false });
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    expect(Table?.GlobalSecondaryIndexes).toBeUndefined();
    expect(Table?.AttributeDefinitions).toEqual([{ AttributeName: 'pk', AttributeType: 'S' }]);
  });
});
