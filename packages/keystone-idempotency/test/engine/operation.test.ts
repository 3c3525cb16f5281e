import { randomUUID } from 'node:crypto';
import { DynamoDbStore, type EffectItem, MAX_TRANSACTION_EFFECTS } from '../../src/dynamodb/store';
import { StagingClosedError, TooManyEffectsError } from '../../src/engine/errors';
import { scopedKey } from '../../src/engine/key';
import { ClaimedOperation } from '../../src/engine/operation';
import { RecordStatus } from '../../src/engine/record';
import { testDatabase } from '../support/dynamodb';

const db = testDatabase();

const store = () => new DynamoDbStore({ client: db.doc, tableName: db.idempotencyTable, leaseSeconds: 30 });
const row = (pk: string): EffectItem => ({ Put: { TableName: db.effectsTable, Item: { pk, sk: randomUUID() } } });
const stored = { statusCode: 200, body: '{"done":true}', headers: {} };

async function claimed(s: DynamoDbStore): Promise<ClaimedOperation<EffectItem>> {
  const key = scopedKey({ accountId: 'acct_1', operation: 'op', key: randomUUID() });
  const outcome = await s.claim(key, 'fp');
  if (outcome.kind !== 'acquired') throw new Error(`expected to acquire ${key}, got ${outcome.kind}`);
  return new ClaimedOperation(s, outcome.lease);
}

describe('ClaimedOperation', () => {
  it('hands the work the lease’s key, downstream key and attempt, staging and steps, and nothing to commit with', async () => {
    const operation = await claimed(store());
    const { handle, lease } = operation;
    expect(handle).toEqual({
      key: lease.key,
      downstreamKey: lease.downstreamKey,
      attempt: 1,
      stage: expect.any(Function),
      step: expect.any(Function),
    });
    expect(Object.isFrozen(handle)).toBe(true);
  });

  it('commits every item staged, one call or several, with the key’s completion', async () => {
    const s = store();
    const operation = await claimed(s);
    const pk = operation.lease.downstreamKey;
    operation.handle.stage(row(pk), row(pk));
    operation.handle.stage(row(pk));
    await operation.commit(stored);
    expect(await db.itemsUnder(pk)).toBe(3);
    expect(await s.get(operation.lease.key)).toMatchObject({ status: RecordStatus.Completed, response: stored });
  });

  it('writes none of the staged items when the key is released', async () => {
    const s = store();
    const operation = await claimed(s);
    const pk = operation.lease.downstreamKey;
    operation.handle.stage(row(pk));
    expect(await operation.release()).toBe(true);
    expect(await db.itemsUnder(pk)).toBe(0);
    expect(await s.get(operation.lease.key)).toMatchObject({ status: RecordStatus.Released });
  });

  it(`takes up to ${MAX_TRANSACTION_EFFECTS} items, as one transaction holds with the completion, and refuses more`, async () => {
    const operation = await claimed(store());
    const pk = operation.lease.downstreamKey;
    operation.handle.stage(...Array.from({ length: MAX_TRANSACTION_EFFECTS - 1 }, () => row(pk)));
    expect(() => operation.handle.stage(row(pk), row(pk))).toThrow(TooManyEffectsError);
    operation.handle.stage(row(pk));
    await operation.commit(stored);
    expect(await db.itemsUnder(pk)).toBe(MAX_TRANSACTION_EFFECTS);
  });

  it('refuses an item staged once the work has returned, rather than losing it', async () => {
    const operation = await claimed(store());
    const pk = operation.lease.downstreamKey;
    operation.handle.stage(row(pk));
    await operation.commit(stored);
    expect(() => operation.handle.stage(row(pk))).toThrow(StagingClosedError);
    expect(await db.itemsUnder(pk)).toBe(1);
  });

  it('refuses staging after a release too', async () => {
    const operation = await claimed(store());
    await operation.release();
    expect(() => operation.handle.stage(row(operation.lease.downstreamKey))).toThrow(StagingClosedError);
  });
});
