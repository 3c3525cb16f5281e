import { randomUUID } from 'node:crypto';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { InvalidNaturalRequestError, putIfAbsent } from '../../src/dynamodb';
import { testDatabase } from '../support/dynamodb';

const db = testDatabase();
const { doc, requests } = db;

const keyAttributes = ['pk', 'sk'] as const;
const order = () => ({ pk: `ORDER#${randomUUID()}`, sk: 'PAYMENT' });

describe('putIfAbsent', () => {
  it('creates an absent item', async () => {
    const item = { ...order(), amount: 1200 };
    expect(await putIfAbsent(doc, { TableName: db.effectsTable, Item: item, keyAttributes })).toEqual({
      kind: 'created',
      item,
    });
    const { Item } = await doc.send(new GetCommand({ TableName: db.effectsTable, Key: { pk: item.pk, sk: item.sk } }));
    expect(Item).toEqual(item);
  });

  it('leaves an existing item untouched and returns it from the same single request', async () => {
    const key = order();
    await putIfAbsent(doc, { TableName: db.effectsTable, Item: { ...key, amount: 1200 }, keyAttributes });
    requests.reset();
    const again = await putIfAbsent(doc, {
      TableName: db.effectsTable,
      Item: { ...key, amount: 9999 },
      keyAttributes,
    });
    expect(again).toEqual({ kind: 'exists', item: { ...key, amount: 1200 } });
    expect(requests.sent).toEqual(['PutItemCommand']);
    const { Item } = await doc.send(new GetCommand({ TableName: db.effectsTable, Key: key }));
    expect(Item?.amount).toBe(1200);
  });

  it('treats another sort key under the same partition key as another item', async () => {
    const { pk } = order();
    await putIfAbsent(doc, { TableName: db.effectsTable, Item: { pk, sk: 'A' }, keyAttributes });
    expect((await putIfAbsent(doc, { TableName: db.effectsTable, Item: { pk, sk: 'B' }, keyAttributes })).kind).toBe(
      'created',
    );
  });

  it('lets exactly one of 20 concurrent puts create the item, and shows every other caller the winner', async () => {
    const key = order();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        putIfAbsent(doc, { TableName: db.effectsTable, Item: { ...key, by: i }, keyAttributes }),
      ),
    );
    const created = results.filter((result) => result.kind === 'created');
    expect(created).toHaveLength(1);
    const winner = created[0]?.item.by;
    expect(results.filter((result) => result.kind === 'exists').map((result) => result.item.by)).toEqual(
      Array(19).fill(winner),
    );
  });

  it('refuses an item that lacks one of its key attributes, before sending anything', async () => {
    requests.reset();
    await expect(
      putIfAbsent(doc, { TableName: db.effectsTable, Item: { pk: 'ORDER#1' }, keyAttributes: ['pk', 'sk'] }),
    ).rejects.toBeInstanceOf(InvalidNaturalRequestError);
    expect(requests.sent).toEqual([]);
  });
});
