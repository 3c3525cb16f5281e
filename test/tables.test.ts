import { randomUUID } from 'node:crypto';
import { CreateTableCommand, DescribeTableCommand, DescribeTimeToLiveCommand } from '@aws-sdk/client-dynamodb';
import {
  idempotencyTableRequests,
  RECOVERY_INDEX,
  RecordAttribute,
  TTL_ATTRIBUTE,
} from 'keystone-idempotency/dynamodb';
import { idempotencyTable, paymentsTable } from '../lib/tables/definitions';
import { createTableInput, ensureTable } from '../lib/tables/ensure';
import { createTestTable, localClient } from './support/dynamodb';

describe('table definitions', () => {
  const client = localClient();
  afterAll(() => client.destroy());

  it("asks for the very table the library's idempotencyTableRequests describes (one definition)", () => {
    expect(createTableInput(idempotencyTable, 't')).toEqual(idempotencyTableRequests('t').createTable);
  });

  it('creates the idempotency table with TTL on the engine expiry attribute', async () => {
    const name = await createTestTable(client, idempotencyTable);
    const ttl = await client.send(new DescribeTimeToLiveCommand({ TableName: name }));
    expect(ttl.TimeToLiveDescription?.AttributeName).toBe(TTL_ATTRIBUTE);
    const table = await client.send(new DescribeTableCommand({ TableName: name }));
    expect(table.Table?.KeySchema).toEqual([{ AttributeName: 'pk', KeyType: 'HASH' }]);
  });

  it('gives the idempotency table the sparse recovery index, keys only', async () => {
    const name = await createTestTable(client, idempotencyTable);
    const table = await client.send(new DescribeTableCommand({ TableName: name }));
    expect(table.Table?.GlobalSecondaryIndexes).toEqual([
      expect.objectContaining({
        IndexName: RECOVERY_INDEX,
        KeySchema: [
          { AttributeName: RecordAttribute.recoveryShard, KeyType: 'HASH' },
          { AttributeName: RecordAttribute.recoverAt, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'KEYS_ONLY' },
      }),
    ]);
  });

  it('adds the recovery index to an idempotency table made before the index existed', async () => {
    const name = `Idempotency-old-${randomUUID().slice(0, 8)}`;
    await client.send(
      new CreateTableCommand({
        TableName: name,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      }),
    );
    await ensureTable(client, idempotencyTable, name);
    const table = await client.send(new DescribeTableCommand({ TableName: name }));
    expect(table.Table?.GlobalSecondaryIndexes?.map((index) => index.IndexName)).toEqual([RECOVERY_INDEX]);
  });

  it('leaves an existing table alone when ensured twice', async () => {
    const name = await createTestTable(client, paymentsTable);
    await expect(ensureTable(client, paymentsTable, name)).resolves.toBeUndefined();
    const table = await client.send(new DescribeTableCommand({ TableName: name }));
    expect(table.Table?.KeySchema?.map((k) => k.KeyType)).toEqual(['HASH', 'RANGE']);
  });
});
