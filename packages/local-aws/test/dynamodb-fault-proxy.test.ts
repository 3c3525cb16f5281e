import { randomUUID } from 'node:crypto';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import {
  type DynamoDbFaultProxy,
  DynamoDbTarget,
  type RequestMatcher,
  replyGate,
  startDynamoDbFaultProxy,
} from '../src/dynamodb-fault-proxy';
import { dynamoDbEndpoint, localClient, localDocumentClient, testTable } from './databases';
import { eventually } from './support';

/** The proxy's faults, against DynamoDB Local and the real SDK: what each does to a write and what the caller sees. */
const db = testTable();
let proxy: DynamoDbFaultProxy;
const clients: ReturnType<typeof localClient>[] = [];

beforeAll(async () => {
  proxy = await startDynamoDbFaultProxy(dynamoDbEndpoint());
});
afterAll(async () => {
  for (const client of clients) client.destroy();
  await proxy?.close();
});

/** A DocumentClient that talks through the proxy; `maxAttempts: 1` shows a fault without the SDK's retries. */
function throughProxy(maxAttempts?: number) {
  const client = localClient({ endpoint: proxy.url, ...(maxAttempts ? { maxAttempts } : {}) });
  clients.push(client);
  return localDocumentClient(client);
}

/** A put of one item, and a matcher for exactly that put. */
function putOf(pk: string): { command: PutCommand; match: RequestMatcher } {
  return {
    command: new PutCommand({ TableName: db.name, Item: { pk, sk: 'ITEM' } }),
    match: {
      name: `put of ${pk}`,
      target: DynamoDbTarget.PutItem,
      when: (body) => JSON.stringify(body.Item).includes(pk),
    },
  };
}

async function stored(pk: string): Promise<boolean> {
  const { Item } = await db.doc.send(new GetCommand({ TableName: db.name, Key: { pk, sk: 'ITEM' } }));
  return Item !== undefined;
}

describe('startDynamoDbFaultProxy', () => {
  it('forwards what no rule matches, untouched', async () => {
    const pk = randomUUID();
    const { command, match } = putOf(pk);
    await throughProxy().send(command);
    expect(await stored(pk)).toBe(true);
    expect(proxy.requests(match).map((request) => [request.attempt, request.rule, request.outcome])).toEqual([
      [1, undefined, 200],
    ]);
  });

  it('applies a write whose reply it drops; the SDK retries it and gets the next reply', async () => {
    const pk = randomUUID();
    const { command, match } = putOf(pk);
    const rule = proxy.arm({ match, fault: { mode: 'drop-reply' }, count: 1 });
    await throughProxy().send(command);
    expect(rule.fired()).toBe(1);
    expect(proxy.requests(match).map((request) => [request.attempt, request.outcome])).toEqual([
      [1, 'dropped'],
      [2, 200],
    ]);
  });

  it('answers an error without forwarding: nothing is written, and the SDK names the error', async () => {
    const pk = randomUUID();
    const { command, match } = putOf(pk);
    proxy.arm({ match, fault: { mode: 'error', error: 'ProvisionedThroughputExceededException' }, count: 1 });
    await expect(throughProxy(1).send(command)).rejects.toMatchObject({
      name: 'ProvisionedThroughputExceededException',
      $metadata: { httpStatusCode: 400 },
    });
    expect(await stored(pk)).toBe(false);
  });

  it('answers a 500 as DynamoDB does, an InternalServerError', async () => {
    const { command, match } = putOf(randomUUID());
    proxy.arm({ match, fault: { mode: 'error', error: 'InternalServerError' }, count: 1 });
    await expect(throughProxy(1).send(command)).rejects.toMatchObject({
      name: 'InternalServerError',
      $metadata: { httpStatusCode: 500 },
    });
  });

  it('holds a reply it delays, while the write is already applied', async () => {
    const pk = randomUUID();
    const { command, match } = putOf(pk);
    proxy.arm({ match, fault: { mode: 'delay-reply', ms: 5000 }, count: 1 });
    const startedAt = Date.now();
    const put = throughProxy().send(command);
    // The write lands while its reply is held: seen from DynamoDB, within the 5 s the proxy holds it.
    await eventually(async () => ((await stored(pk)) ? true : undefined), 4000);
    expect(proxy.requests(match).map((request) => request.outcome)).toEqual(['pending']);
    await put;
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(5000);
    expect(proxy.requests(match).map((request) => request.outcome)).toEqual([200]);
  });

  it('holds a reply until it is told, while the write is already applied', async () => {
    const pk = randomUUID();
    const { command, match } = putOf(pk);
    const { until, letGo } = replyGate();
    proxy.arm({ match, fault: { mode: 'hold-reply', until }, count: 1 });
    let answered = false;
    const put = throughProxy()
      .send(command)
      .then(() => {
        answered = true;
      });
    await eventually(async () => ((await stored(pk)) ? true : undefined), 4000);
    expect(proxy.requests(match).map((request) => request.outcome)).toEqual(['pending']);
    expect(answered).toBe(false);
    letGo();
    await put;
    expect(proxy.requests(match).map((request) => request.outcome)).toEqual([200]);
  });

  it('drops a held reply whose caller went away, as soon as it goes', async () => {
    const pk = randomUUID();
    const { command, match } = putOf(pk);
    const { until, letGo } = replyGate();
    proxy.arm({ match, fault: { mode: 'hold-reply', until }, count: 1 });
    const caller = new AbortController();
    const put = throughProxy(1).send(command, { abortSignal: caller.signal });
    await eventually(async () => ((await stored(pk)) ? true : undefined), 4000);
    caller.abort(); // the caller is gone: its connection closes
    await expect(put).rejects.toMatchObject({ name: 'AbortError' });
    // Seen as dropped while the reply is still held: no need to let it go to know the caller never hears.
    await eventually(() => (proxy.requests(match)[0]?.outcome !== 'pending' ? true : undefined));
    expect(proxy.requests(match).map((request) => request.outcome)).toEqual(['dropped']);
    letGo();
  });

  it('faults only `count` matching requests', async () => {
    const { command, match } = putOf(randomUUID());
    const rule = proxy.arm({ match, fault: { mode: 'error', error: 'ThrottlingException' }, count: 2 });
    const client = throughProxy(1);
    await expect(client.send(command)).rejects.toMatchObject({ name: 'ThrottlingException' });
    await expect(client.send(command)).rejects.toMatchObject({ name: 'ThrottlingException' });
    await client.send(command);
    expect(rule.fired()).toBe(2);
  });
});
