import { randomUUID } from 'node:crypto';
import { GetCommand, PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { compareAndSet, compareAndSetEffect, InvalidNaturalRequestError } from '../../src/dynamodb';
import { testDatabase } from '../support/dynamodb';

const db = testDatabase();
const { doc, requests } = db;

async function payment(status = 'succeeded') {
  const Key = { pk: `ACCOUNT#${randomUUID()}`, sk: 'PAYMENT#p1' };
  await doc.send(new PutCommand({ TableName: db.effectsTable, Item: { ...Key, status, amount: 1200 } }));
  return Key;
}
const settle = (Key: Record<string, unknown>, settledAt = '2026-11-30T12:00:00Z') => ({
  TableName: db.effectsTable,
  Key,
  attribute: 'status',
  expected: 'succeeded',
  next: 'settled',
  set: { settledAt },
});

describe('compareAndSet', () => {
  it('changes the item on the first call and returns it as it now stands', async () => {
    const Key = await payment();
    expect(await compareAndSet(doc, settle(Key))).toEqual({
      kind: 'changed',
      item: { ...Key, status: 'settled', amount: 1200, settledAt: '2026-11-30T12:00:00Z' },
    });
  });

  it('reports a repeat as unchanged, in one request, and leaves the item exactly as the first call did', async () => {
    const Key = await payment();
    const first = await compareAndSet(doc, settle(Key));
    requests.reset();
    const repeat = await compareAndSet(doc, settle(Key, '2026-12-01T00:00:00Z'));
    expect(repeat.kind).toBe('unchanged');
    if (first.kind !== 'changed' || repeat.kind !== 'unchanged') throw new Error('unexpected outcomes');
    expect(repeat.item).toEqual(first.item);
    expect(requests.sent).toEqual(['UpdateItemCommand']);
    const { Item } = await doc.send(new GetCommand({ TableName: db.effectsTable, Key }));
    expect(Item).toEqual(first.item);
  });

  it('leaves an item in another state alone and shows that state', async () => {
    const Key = await payment('refunded');
    const result = await compareAndSet(doc, settle(Key));
    expect(result).toMatchObject({ kind: 'unchanged', item: { status: 'refunded' } });
  });

  it('reports a missing item and never creates one', async () => {
    const Key = { pk: `ACCOUNT#${randomUUID()}`, sk: 'PAYMENT#none' };
    expect(await compareAndSet(doc, settle(Key))).toEqual({ kind: 'missing' });
    const { Item } = await doc.send(new GetCommand({ TableName: db.effectsTable, Key }));
    expect(Item).toBeUndefined();
  });

  it('lets exactly one of 20 concurrent transitions change the item', async () => {
    const Key = await payment();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        compareAndSet(doc, settle(Key, `2026-11-30T12:00:${String(i).padStart(2, '0')}Z`)),
      ),
    );
    const changed = results.filter((result) => result.kind === 'changed');
    expect(changed).toHaveLength(1);
    expect(results.filter((result) => result.kind === 'unchanged')).toHaveLength(19);
    const { Item } = await doc.send(new GetCommand({ TableName: db.effectsTable, Key }));
    expect(Item).toEqual(changed[0]?.item);
  });

  it('treats reserved words and dotted names as plain top-level attributes', async () => {
    const Key = await payment();
    const result = await compareAndSet(doc, { ...settle(Key), set: { name: 'n', 'a.b': 1 } });
    expect(result).toMatchObject({ kind: 'changed', item: { name: 'n', 'a.b': 1 } });
  });

  it('refuses to touch a key attribute or to set the state attribute twice', () => {
    const Key = { pk: 'p', sk: 's' };
    expect(() => compareAndSetEffect({ ...settle(Key), attribute: 'sk' })).toThrow(InvalidNaturalRequestError);
    expect(() => compareAndSetEffect({ ...settle(Key), set: { pk: 'x' } })).toThrow(InvalidNaturalRequestError);
    expect(() => compareAndSetEffect({ ...settle(Key), set: { status: 'x' } })).toThrow(InvalidNaturalRequestError);
    expect(() => compareAndSetEffect({ ...settle(Key), expected: undefined })).toThrow(InvalidNaturalRequestError);
  });
});

describe('compareAndSetEffect', () => {
  it('applies the same transition inside a transaction, and cancels the transaction on a repeat', async () => {
    const Key = await payment();
    const witness = { pk: Key.pk, sk: 'LEDGER#settlement' };
    const transaction = () =>
      doc.send(
        new TransactWriteCommand({
          TransactItems: [compareAndSetEffect(settle(Key)), { Put: { TableName: db.effectsTable, Item: witness } }],
        }),
      );
    await transaction();
    expect((await doc.send(new GetCommand({ TableName: db.effectsTable, Key }))).Item?.status).toBe('settled');
    await expect(transaction()).rejects.toMatchObject({ name: 'TransactionCanceledException' });
  });
});
