import { randomUUID } from 'node:crypto';
import {
  type DynamoDbFaultProxy,
  matches,
  startDynamoDbFaultProxy,
} from '@keystone-idempotency/local-aws/dynamodb-fault-proxy';
import { DynamoDbStore } from '../../src/dynamodb/store';
import { scopedKey } from '../../src/engine/key';
import { localClient, localDocumentClient, testDatabase } from './dynamodb';
import { engineRequests } from './engine-requests';
import { FakeClock } from './fake-clock';

/**
 * The matchers the fault tests arm their rules with, against the requests the engine really sends: each of its
 * steps is recognised as itself and as nothing else.
 */
const db = testDatabase();
let proxy: DynamoDbFaultProxy;
let client: ReturnType<typeof localClient>;

beforeAll(async () => {
  proxy = await startDynamoDbFaultProxy(process.env.DYNAMODB_ENDPOINT!);
  client = localClient({ endpoint: proxy.url });
});
afterAll(async () => {
  client?.destroy();
  await proxy?.close();
});

const created = { statusCode: 201, body: '{}', headers: { 'Content-Type': 'application/json' } };

function throughProxy(clock = new FakeClock()) {
  return new DynamoDbStore({ client: localDocumentClient(client), tableName: db.idempotencyTable, clock });
}

/** Which steps match each request the proxy saw for this key, in order. */
function stepsSeen(key: string): string[][] {
  const steps = engineRequests(db.idempotencyTable);
  return proxy
    .requests()
    .filter((request) => JSON.stringify(request.body).includes(key))
    .map((request) =>
      Object.entries(steps)
        .filter(([, step]) => matches(step(key), request))
        .map(([name]) => name),
    );
}

describe('engineRequests', () => {
  it('tells a claim, a release, a takeover of the released record, a commit and a read apart', async () => {
    const key = scopedKey({ accountId: 'acct_1', operation: 'POST /payments', key: randomUUID() });
    const store = throughProxy();
    const first = await store.claim(key, 'fp');
    if (first.kind !== 'acquired') throw new Error(`expected to acquire, got ${first.kind}`);
    await store.release(first.lease);
    const second = await store.claim(key, 'fp');
    if (second.kind !== 'acquired') throw new Error(`expected to take over, got ${second.kind}`);
    await store.commit(second.lease, created, [
      { Put: { TableName: db.effectsTable, Item: { pk: key, sk: 'PAYMENT#1' } } },
    ]);
    await store.get(key);

    // The second claim's put fails its condition against the released record, then takes it over.
    expect(stepsSeen(key)).toEqual([['claim'], ['release'], ['claim'], ['takeover'], ['commit'], ['read']]);
  });

  it('tells a commit with nothing staged, one update to COMPLETED, from a release and a takeover', async () => {
    const key = scopedKey({ accountId: 'acct_1', operation: 'POST /payments', key: randomUUID() });
    const store = throughProxy();
    const first = await store.claim(key, 'fp');
    if (first.kind !== 'acquired') throw new Error(`expected to acquire, got ${first.kind}`);
    await store.release(first.lease);
    const second = await store.claim(key, 'fp');
    if (second.kind !== 'acquired') throw new Error(`expected to take over, got ${second.kind}`);
    await store.commit(second.lease, created);

    expect(stepsSeen(key)).toEqual([['claim'], ['release'], ['claim'], ['takeover'], ['completion']]);
  });

  it('tells the takeover of an expired lease from a release', async () => {
    const key = scopedKey({ accountId: 'acct_1', operation: 'POST /payments', key: randomUUID() });
    const clock = new FakeClock();
    const store = throughProxy(clock);
    await store.claim(key, 'fp');
    clock.advance(store.leaseMs + 1);
    await store.claim(key, 'fp');

    expect(stepsSeen(key)).toEqual([['claim'], ['claim'], ['takeover']]);
  });

  it('matches no request of another key or another table', async () => {
    const key = scopedKey({ accountId: 'acct_1', operation: 'POST /payments', key: randomUUID() });
    await throughProxy().claim(key, 'fp');
    const steps = engineRequests(db.idempotencyTable);
    const elsewhere = engineRequests('another-table');
    const [claim] = proxy.requests(steps.claim(key));
    expect(claim).toBeDefined();
    expect(proxy.requests(steps.claim(`${key}-other`))).toEqual([]);
    expect(proxy.requests(elsewhere.claim(key))).toEqual([]);
  });
});
