import { DescribeTableCommand, DescribeTimeToLiveCommand } from '@aws-sdk/client-dynamodb';
import { TTL_ATTRIBUTE } from '../lib/engine/layout';
import { idempotencyTable, paymentsTable } from '../lib/tables/definitions';
import { ensureTable } from '../lib/tables/ensure';
import { createTestTable, localClient } from './support/dynamodb';

describe('table definitions', () => {
  const client = localClient();
  afterAll(() => client.destroy());

  it('creates the idempotency table with TTL on the engine expiry attribute', async () => {
    const name = await createTestTable(client, idempotencyTable);
    const ttl = await client.send(new DescribeTimeToLiveCommand({ TableName: name }));
    expect(ttl.TimeToLiveDescription?.AttributeName).toBe(TTL_ATTRIBUTE);
    const table = await client.send(new DescribeTableCommand({ TableName: name }));
    expect(table.Table?.KeySchema).toEqual([{ AttributeName: 'pk', KeyType: 'HASH' }]);
  });

  it('leaves an existing table alone when ensured twice', async () => {
    const name = await createTestTable(client, paymentsTable);
    await expect(ensureTable(client, paymentsTable, name)).resolves.toBeUndefined();
    const table = await client.send(new DescribeTableCommand({ TableName: name }));
    expect(table.Table?.KeySchema?.map((k) => k.KeyType)).toEqual(['HASH', 'RANGE']);
  });
});
