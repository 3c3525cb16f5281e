import { randomUUID } from 'node:crypto';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { DynamoDbStore } from 'keystone-idempotency/dynamodb';
import { fingerprint, scopedKey } from 'keystone-idempotency/engine';
import type { HttpEvent } from 'keystone-idempotency/http';
import { type Sandbox, startSandbox } from '../../lib/sandbox/processor';
import { apiEvent, lambdaContext } from '../support/api-event';
import { testDatabase } from '../support/dynamodb';
import { httpApiEvent, lambdaCaller } from '../support/front-door-events';

/**
 * The payments function as Lambda runs it: its own middy composition (problem handler, body validation, the
 * idempotency middleware, Powertools Metrics through `publishMetrics`), against DynamoDB Local and the sandbox
 * processor, with what Powertools Metrics writes to stdout captured.
 *
 * middy skips every `after` when a `before` answers early, so an outcome counted by an early answer (a replay, a
 * duplicate in flight, a reused key, a bad key) used to stay in the Metrics buffer until some later invocation's
 * flush, or forever. Each outcome must be published by the invocation that counted it, and by no other.
 */
const db = testDatabase();
let sandbox: Sandbox;
let handler: typeof import('../../functions/payments-create')['handler'];
const ACCOUNT = 'acct_metrics';

beforeAll(async () => {
  sandbox = await startSandbox();
  // The function reads its environment once, at import (cold start): set it first.
  Object.assign(process.env, {
    IDEMPOTENCY_TABLE: db.idempotencyTable,
    PAYMENTS_TABLE: db.paymentsTable,
    PROCESSOR_URL: sandbox.url,
    POWERTOOLS_METRICS_NAMESPACE: 'Keystone/test',
    POWERTOOLS_METRICS_DISABLED: 'false',
    POWERTOOLS_LOG_LEVEL: 'SILENT',
  });
  ({ handler } = await import('../../functions/payments-create'));
});
afterAll(() => sandbox?.close());

/** One EMF document per publish: the metric names it carries, with their values. */
type Published = Record<string, unknown>;

/** Runs one invocation and returns the EMF documents written to stdout while it ran, and its response. */
async function invoke(event: HttpEvent): Promise<{ response: APIGatewayProxyResult; published: Published[] }> {
  const lines: string[] = [];
  const write = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    lines.push(...String(chunk).split('\n'));
    return true;
  });
  try {
    // A REST API's or an HTTP API's event: either answer has a status, headers and a body (payload 2.0 no more).
    const response = (await handler(event, lambdaContext())) as APIGatewayProxyResult;
    return { response, published: lines.flatMap(emf) };
  } finally {
    write.mockRestore();
  }
}

function emf(line: string): Published[] {
  if (!line.startsWith('{')) return [];
  const document = JSON.parse(line) as { _aws?: { CloudWatchMetrics: { Metrics: { Name: string }[] }[] } };
  const names = document._aws?.CloudWatchMetrics.flatMap((set) => set.Metrics.map((metric) => metric.Name));
  if (!names) return [];
  return [Object.fromEntries(names.map((name) => [name, (document as Record<string, unknown>)[name]]))];
}

const body = (amount = 4200) => ({ amount, currency: 'usd', source: 'tok_visa' });
const post = (key: string | undefined, payload: unknown = body()) =>
  apiEvent({ body: payload, accountId: ACCOUNT, headers: key === undefined ? {} : { 'Idempotency-Key': key } });

describe('the payments function, composed as deployed', () => {
  it('publishes a first request’s claim and commit when it answers', async () => {
    const { response, published } = await invoke(post(randomUUID()));
    expect(response.statusCode).toBe(201);
    expect(published).toEqual([{ IdempotencyClaimed: 1, IdempotencyCommitted: 1 }]);
  });

  it('publishes a replay in the invocation that replayed, and never again', async () => {
    const key = randomUUID();
    await invoke(post(key));
    const replay = await invoke(post(key));
    expect(replay.response.headers?.['Idempotent-Replayed']).toBe('true');
    expect(replay.published).toEqual([{ IdempotencyReplayed: 1 }]);

    // The next invocation publishes only its own outcomes: nothing of the replay was left behind.
    const next = await invoke(post(randomUUID()));
    expect(next.published).toEqual([{ IdempotencyClaimed: 1, IdempotencyCommitted: 1 }]);
  });

  it('publishes a duplicate in flight in the invocation that answered 409', async () => {
    const key = randomUUID();
    const event = post(key);
    // The original, still running elsewhere: a live claim on the same key and body, as the function makes it.
    const store = new DynamoDbStore({ client: db.doc, tableName: db.idempotencyTable });
    const operation = 'POST /payments';
    const claimed = await store.claim(
      scopedKey({ accountId: ACCOUNT, operation, key }),
      fingerprint({ operation, body: event.body, contentType: 'application/json' }),
    );
    expect(claimed.kind).toBe('acquired');

    const { response, published } = await invoke(event);
    expect(response.statusCode).toBe(409);
    expect(published).toEqual([{ IdempotencyInFlight: 1 }]);
  });

  it('publishes a reused key in the invocation that answered 422', async () => {
    const key = randomUUID();
    await invoke(post(key));
    const { response, published } = await invoke(post(key, body(1)));
    expect(response.statusCode).toBe(422);
    expect(published).toEqual([{ IdempotencyMismatch: 1 }]);
  });

  it('publishes a missing key in the invocation that answered 400', async () => {
    const { response, published } = await invoke(post(undefined));
    expect(response.statusCode).toBe(400);
    expect(published).toEqual([{ IdempotencyKeyInvalid: 1 }]);
  });

  it('publishes nothing for an invalid body, which never reaches the idempotency middleware', async () => {
    const { response, published } = await invoke(post(randomUUID(), { amount: -1 }));
    expect(response.statusCode).toBe(400);
    expect(published).toEqual([]);
  });
});

describe('the payments function behind an HTTP API (payload 2.0)', () => {
  const viaHttpApi = (key: string, payload: unknown = body()) =>
    httpApiEvent({ body: payload, headers: { 'Idempotency-Key': key } }, lambdaCaller(ACCOUNT));

  it('charges, answers in payload 2.0, and replays: also a key first sent through the REST API', async () => {
    const key = randomUUID();
    const created = await invoke(viaHttpApi(key));
    expect(created.response.statusCode).toBe(201);
    expect(created.response).not.toHaveProperty('multiValueHeaders');
    expect(created.response.headers?.Location).toMatch(/^\/payments\/pay_/);
    const replay = await invoke(viaHttpApi(key));
    expect(replay.response.body).toBe(created.response.body);
    expect(replay.response.headers?.['Idempotent-Replayed']).toBe('true');

    const viaRest = randomUUID();
    const first = await invoke(post(viaRest));
    const again = await invoke(viaHttpApi(viaRest));
    expect(again.response.body).toBe(first.response.body);
    expect(again.published).toEqual([{ IdempotencyReplayed: 1 }]);
  });

  it('answers the key reused with another body with 422, and a bad body with 400', async () => {
    const key = randomUUID();
    await invoke(viaHttpApi(key));
    expect((await invoke(viaHttpApi(key, body(1)))).response.statusCode).toBe(422);
    expect((await invoke(viaHttpApi(randomUUID(), { amount: -1 }))).response.statusCode).toBe(400);
  });
});
