import { randomUUID } from 'node:crypto';
import { GetCommand, PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { InvalidNaturalRequestError, upsert, upsertEffect } from '../../src/dynamodb';
import { testDatabase } from '../support/dynamodb';

const db = testDatabase();
const { doc } = db;

const profileKey = () => ({ pk: `USER#${randomUUID()}`, sk: 'PROFILE' });
const read = async (Key: Record<string, unknown>) =>
  (await doc.send(new GetCommand({ TableName: db.effectsTable, Key }))).Item;

describe('upsert', () => {
  it('creates the item when absent and returns it', async () => {
    const Key = profileKey();
    const item = await upsert(doc, {
      TableName: db.effectsTable,
      Key,
      values: { email: 'ada@example.com', verified: true },
    });
    expect(item).toEqual({ ...Key, email: 'ada@example.com', verified: true });
  });

  it('leaves the item the same after two calls as after one', async () => {
    const once = profileKey();
    const twice = { ...once, pk: `${once.pk}-twice` };
    const values = { email: 'ada@example.com', verified: true, tags: ['a', 'b'] };
    await upsert(doc, { TableName: db.effectsTable, Key: once, values });
    await upsert(doc, { TableName: db.effectsTable, Key: twice, values });
    const second = await upsert(doc, { TableName: db.effectsTable, Key: twice, values });
    const { pk: _pk1, ...afterOnce } = (await read(once)) ?? {};
    const { pk: _pk2, ...afterTwice } = (await read(twice)) ?? {};
    expect(afterTwice).toEqual(afterOnce);
    expect(second).toEqual({ ...twice, ...values });
  });

  it('keeps the attributes it does not name', async () => {
    const Key = profileKey();
    await doc.send(new PutCommand({ TableName: db.effectsTable, Item: { ...Key, createdAt: 1 } }));
    expect(await upsert(doc, { TableName: db.effectsTable, Key, values: { verified: true } })).toEqual({
      ...Key,
      createdAt: 1,
      verified: true,
    });
  });

  it('refuses empty values, undefined values and key attributes', () => {
    const Key = profileKey();
    expect(() => upsertEffect({ TableName: db.effectsTable, Key, values: {} })).toThrow(InvalidNaturalRequestError);
    expect(() => upsertEffect({ TableName: db.effectsTable, Key, values: { a: undefined } })).toThrow(
      InvalidNaturalRequestError,
    );
    expect(() => upsertEffect({ TableName: db.effectsTable, Key, values: { sk: 'x' } })).toThrow(
      InvalidNaturalRequestError,
    );
  });
});

describe('upsertEffect', () => {
  it('applies the same upsert inside a transaction, any number of times', async () => {
    const Key = profileKey();
    const item = upsertEffect({ TableName: db.effectsTable, Key, values: { verified: true } });
    await doc.send(new TransactWriteCommand({ TransactItems: [item] }));
    await doc.send(new TransactWriteCommand({ TransactItems: [item] }));
    expect(await read(Key)).toEqual({ ...Key, verified: true });
  });
});
