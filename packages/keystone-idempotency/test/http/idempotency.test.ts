import { randomUUID } from 'node:crypto';
import {
  type DynamoDbFaultProxy,
  DynamoDbTarget,
  startDynamoDbFaultProxy,
} from '@keystone-idempotency/local-aws/dynamodb-fault-proxy';
import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import { z } from 'zod';
import { DynamoDbStore, type EffectItem, MAX_TRANSACTION_EFFECTS } from '../../src/dynamodb/store';
import { StagingClosedError, StepOutcomeUnknownError, StepRefusedError } from '../../src/engine/errors';
import { scopedKey } from '../../src/engine/key';
import type { IdempotencyHandle } from '../../src/engine/operation';
import { RecordStatus } from '../../src/engine/record';
import { ReplayCache } from '../../src/engine/replay-cache';
import { answersEarly } from '../../src/http/early-response';
import { problemErrorHandler } from '../../src/http/error-handler';
import { type HttpIdempotencyOptions, httpIdempotency, type WithIdempotency } from '../../src/http/idempotency';
import { ProblemType, problemType } from '../../src/http/problem';
import { validateJsonBody, type WithBody } from '../../src/http/validate-body';
import { apiEvent, lambdaContext } from '../support/api-event';
import { localClient, localDocumentClient, testDatabase } from '../support/dynamodb';
import { FakeClock } from '../support/fake-clock';

const db = testDatabase();
const { doc, requests } = db;

const Body = z.strictObject({ amount: z.number().int().positive(), currency: z.string().length(3) });
type Ctx = Context & WithIdempotency<DynamoDbStore> & WithBody<z.infer<typeof Body>>;

/** A payment-like handler whose behaviour each test steers, recording every run and the downstream key it saw. */
function harness(
  options: {
    clock?: FakeClock;
    leaseSeconds?: number;
    metrics?: string[];
    client?: typeof doc;
    cached?: boolean;
    responseHook?: HttpIdempotencyOptions<EffectItem>['responseHook'];
  } = {},
) {
  const dynamodb = new DynamoDbStore({
    client: options.client ?? doc,
    tableName: db.idempotencyTable,
    clock: options.clock,
    leaseSeconds: options.leaseSeconds ?? 30,
  });
  const store = options.cached ? new ReplayCache(dynamodb, { clock: options.clock }) : dynamodb;
  const runs: { downstreamKey: string; attempt: number }[] = [];
  let behaviour: (ctx: Ctx) => Promise<APIGatewayProxyResult> = async (ctx) => {
    const id = `pay_${randomUUID().slice(0, 8)}`;
    ctx.idempotency.stage({
      Put: { TableName: db.effectsTable, Item: { pk: `TEST#${ctx.idempotency.downstreamKey}`, sk: id } },
    });
    return {
      statusCode: 201,
      headers: { 'Content-Type': 'application/json', Location: `/payments/${id}`, 'X-Not-Stored': 'x' },
      body: JSON.stringify({ id, amount: ctx.body.amount }),
    };
  };
  const handler = middy<APIGatewayProxyEvent, APIGatewayProxyResult, Error, Ctx>(
    async (_event: APIGatewayProxyEvent, ctx: Ctx) => {
      runs.push({ downstreamKey: ctx.idempotency.downstreamKey, attempt: ctx.idempotency.attempt });
      return behaviour(ctx);
    },
  )
    .use(problemErrorHandler({ logger: { error: () => undefined } }))
    .use(validateJsonBody(Body))
    .use(
      httpIdempotency({
        store,
        logger: { warn: () => undefined, error: () => undefined },
        metrics: { addMetric: (name) => options.metrics?.push(name) },
        ...(options.responseHook ? { responseHook: options.responseHook } : {}),
      }),
    );
  return {
    runs,
    set: (next: typeof behaviour) => {
      behaviour = next;
    },
    /** `timeoutMs`: the invocation's time, which the claim's lease covers (a lease can't run out under a live call). */
    call: (event: APIGatewayProxyEvent, timeoutMs?: number) => handler(event, lambdaContext(timeoutMs) as Ctx),
  };
}

const post = (key: string | undefined, body: unknown = { amount: 4200, currency: 'usd' }, accountId = 'acct_1') =>
  apiEvent({ body, accountId, headers: key === undefined ? {} : { 'Idempotency-Key': key } });

/** Effect rows the handler staged under this operation's downstream key. */
const effectRows = (downstreamKey: string) => db.itemsUnder(`TEST#${downstreamKey}`);

function problem(result: APIGatewayProxyResult) {
  expect(result.headers?.['Content-Type']).toBe('application/problem+json');
  return JSON.parse(result.body) as { type: string; status: number; detail?: string; errors?: unknown[] };
}

describe('httpIdempotency', () => {
  it('rejects a missing key with 400 problem+json, without touching the store', async () => {
    const h = harness();
    requests.reset();
    const result = await h.call(post(undefined));
    expect(result.statusCode).toBe(400);
    expect(problem(result).type).toMatch(/idempotency-key-missing$/);
    expect(requests.sent).toEqual([]);
    expect(h.runs).toHaveLength(0);
  });

  it('rejects a malformed key with 400', async () => {
    const h = harness();
    const result = await h.call(post('has spaces'));
    expect(result.statusCode).toBe(400);
    expect(problem(result).type).toMatch(/idempotency-key-invalid$/);
  });

  it('rejects a request without an authenticated account and stores nothing', async () => {
    const h = harness();
    requests.reset();
    const result = await h.call(post(randomUUID(), undefined, null as unknown as string));
    expect(result.statusCode).toBe(401);
    expect(requests.sent).toEqual([]);
  });

  it('rejects an invalid body with every problem listed, leaving the key free for the corrected request', async () => {
    const h = harness();
    const key = randomUUID();
    requests.reset();
    const bad = await h.call(post(key, { amount: -1, currency: 'dollars', extra: true }));
    expect(bad.statusCode).toBe(400);
    expect(problem(bad).errors).toHaveLength(3);
    expect(requests.sent).toEqual([]);
    expect((await h.call(post(key))).statusCode).toBe(201);
  });

  it('runs the handler once and replays its response byte for byte, with Idempotent-Replayed', async () => {
    const h = harness();
    const key = randomUUID();
    const first = await h.call(post(key));
    expect(first.statusCode).toBe(201);
    requests.reset();
    const replay = await h.call(post(key));
    expect(requests.sent).toEqual(['PutItemCommand']);
    expect(h.runs).toHaveLength(1);
    expect(replay.statusCode).toBe(201);
    expect(replay.body).toBe(first.body);
    expect(replay.headers).toEqual({
      'Content-Type': 'application/json',
      Location: first.headers?.Location,
      'Idempotent-Replayed': 'true',
    });
    expect(await effectRows(h.runs[0]!.downstreamKey)).toBe(1);
  });

  it('passes every replay, and only a replay, through responseHook', async () => {
    const hooked: number[] = [];
    const h = harness({
      responseHook: (response, record) => {
        hooked.push(record.attempt);
        return { ...response, headers: [...response.headers, ['X-Replayed-Attempt', String(record.attempt)]] };
      },
    });
    const key = randomUUID();
    const first = await h.call(post(key));
    expect(first.headers?.['X-Replayed-Attempt']).toBeUndefined();
    const replay = await h.call(post(key));
    expect(replay.body).toBe(first.body);
    expect(replay.headers).toMatchObject({ 'Idempotent-Replayed': 'true', 'X-Replayed-Attempt': '1' });
    expect(hooked).toEqual([1]);
  });

  it('answers a hot replay with no DynamoDB request when its store is a ReplayCache', async () => {
    const h = harness({ cached: true });
    const key = randomUUID();
    const first = await h.call(post(key));
    requests.reset();
    const replay = await h.call(post(key));
    expect(requests.sent).toEqual([]);
    expect(replay.body).toBe(first.body);
    expect(replay.headers?.['Idempotent-Replayed']).toBe('true');
    const other = await h.call(post(key, { amount: 1, currency: 'usd' }));
    expect(requests.sent).toEqual([]);
    expect(other.statusCode).toBe(422);
    expect(h.runs).toHaveLength(1);
  });

  it('replays a reordered but equal body', async () => {
    const h = harness();
    const key = randomUUID();
    await h.call(post(key, '{"amount":4200,"currency":"usd"}'));
    const replay = await h.call(post(key, '{ "currency": "usd",\n "amount": 4200 }'));
    expect(replay.headers?.['Idempotent-Replayed']).toBe('true');
    expect(h.runs).toHaveLength(1);
  });

  it('answers 422 for the key reused with a different body', async () => {
    const h = harness();
    const key = randomUUID();
    await h.call(post(key));
    const reused = await h.call(post(key, { amount: 9999, currency: 'usd' }));
    expect(reused.statusCode).toBe(422);
    expect(problem(reused).type).toMatch(/idempotency-key-reused$/);
    expect(h.runs).toHaveLength(1);
  });

  it('answers 409 with Retry-After while the original is in flight, then replays', async () => {
    const h = harness();
    const key = randomUUID();
    let finish!: () => void;
    const gate = new Promise<void>((resolve) => {
      finish = resolve;
    });
    h.set(async () => {
      await gate;
      return { statusCode: 201, headers: { 'Content-Type': 'application/json' }, body: '{"ok":true}' };
    });
    const original = h.call(post(key));
    // The original holds the key once its handler runs (after its claim): only then does the duplicate arrive.
    while (h.runs.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    const duplicate = await h.call(post(key));
    expect(duplicate.statusCode).toBe(409);
    expect(duplicate.headers?.['Retry-After']).toBe('1');
    finish();
    expect((await original).statusCode).toBe(201);
    expect((await h.call(post(key))).headers?.['Idempotent-Replayed']).toBe('true');
    expect(h.runs).toHaveLength(1);
  });

  it('stores a deterministic 4xx (a decline) and replays it', async () => {
    const h = harness();
    const key = randomUUID();
    h.set(async () => ({ statusCode: 402, headers: { 'Content-Type': 'application/problem+json' }, body: '{"d":1}' }));
    expect((await h.call(post(key))).statusCode).toBe(402);
    const replay = await h.call(post(key));
    expect(replay.statusCode).toBe(402);
    expect(replay.headers?.['Idempotent-Replayed']).toBe('true');
    expect(h.runs).toHaveLength(1);
  });

  it.each([500, 503, 429])(
    'does not store a %i: the key is released and staged db.effectsTable are not written',
    async (status) => {
      const h = harness();
      const key = randomUUID();
      h.set(async (ctx) => {
        ctx.idempotency.stage({
          Put: { TableName: db.effectsTable, Item: { pk: `TEST#${ctx.idempotency.downstreamKey}`, sk: 'x' } },
        });
        return { statusCode: status, body: '{}' };
      });
      expect((await h.call(post(key))).statusCode).toBe(status);
      expect(await effectRows(h.runs[0]!.downstreamKey)).toBe(0);
      h.set(async () => ({ statusCode: 201, body: '{}' }));
      expect((await h.call(post(key))).statusCode).toBe(201);
      expect(h.runs).toHaveLength(2);
      expect(h.runs[1]!.downstreamKey).toBe(h.runs[0]!.downstreamKey);
      expect(h.runs[1]!.attempt).toBe(2);
    },
  );

  it('releases the key on a thrown error and answers a generic 500 that leaks nothing', async () => {
    const h = harness();
    const key = randomUUID();
    h.set(async () => {
      throw new Error('ECONNRESET secret-host:5432 at Pool.connect');
    });
    const failed = await h.call(post(key));
    expect(failed.statusCode).toBe(500);
    expect(failed.body).not.toMatch(/ECONNRESET|secret-host|at /);
    expect(problem(failed).type).toMatch(/internal-error$/);
    h.set(async () => ({ statusCode: 201, body: '{}' }));
    expect((await h.call(post(key))).statusCode).toBe(201);
    expect(h.runs[1]!.downstreamKey).toBe(h.runs[0]!.downstreamKey);
  });

  it('keeps two accounts using the same key apart', async () => {
    const h = harness();
    const key = randomUUID();
    const a = await h.call(post(key, undefined, 'acct_a'));
    const b = await h.call(post(key, { amount: 1, currency: 'eur' }, 'acct_b'));
    expect([a.statusCode, b.statusCode]).toEqual([201, 201]);
    expect(b.headers?.['Idempotent-Replayed']).toBeUndefined();
    expect(h.runs[0]!.downstreamKey).not.toBe(h.runs[1]!.downstreamKey);
  });

  it('treats the same key on two routes as two operations', async () => {
    const h = harness();
    const key = randomUUID();
    await h.call(post(key));
    const other = await h.call({ ...post(key), resource: '/refunds' });
    expect(other.statusCode).toBe(201);
    expect(h.runs).toHaveLength(2);
  });

  it('turns a superseded owner away with 409 and writes none of its effects', async () => {
    const clock = new FakeClock();
    const h = harness({ clock, leaseSeconds: 5 });
    const key = randomUUID();
    let takeover: Promise<APIGatewayProxyResult> | undefined;
    h.set(async (ctx) => {
      ctx.idempotency.stage({
        Put: { TableName: db.effectsTable, Item: { pk: `TEST#${ctx.idempotency.downstreamKey}`, sk: 's' } },
      });
      if (!takeover) {
        // This owner stalls past its lease; a retry takes the record over and completes first.
        clock.advance(6000);
        h.set(async (inner) => {
          inner.idempotency.stage({
            Put: { TableName: db.effectsTable, Item: { pk: `TEST#${inner.idempotency.downstreamKey}`, sk: 'new' } },
          });
          return { statusCode: 201, body: '{"by":"new owner"}' };
        });
        takeover = h.call(post(key));
        await takeover;
      }
      return { statusCode: 201, body: '{"by":"stale owner"}' };
    });
    // An invocation with less time than the lease: only a stalled clock or a skewed one lets it outlive its lease.
    const stale = await h.call(post(key), 3000);
    expect(stale.statusCode).toBe(409);
    expect((await takeover)?.body).toBe('{"by":"new owner"}');
    expect(h.runs[1]!.downstreamKey).toBe(h.runs[0]!.downstreamKey);
    expect(await effectRows(h.runs[0]!.downstreamKey)).toBe(1);
    expect((await h.call(post(key))).body).toBe('{"by":"new owner"}');
  });

  it('counts each outcome once, for the operator dashboards', async () => {
    const metrics: string[] = [];
    const h = harness({ metrics });
    const key = randomUUID();
    await h.call(post(key));
    await h.call(post(key));
    await h.call(post(key, { amount: 1, currency: 'usd' }));
    h.set(async () => ({ statusCode: 503, body: '{}' }));
    await h.call(post(randomUUID()));
    await h.call(post(undefined));
    expect(metrics).toEqual([
      'IdempotencyClaimed',
      'IdempotencyCommitted',
      'IdempotencyReplayed',
      'IdempotencyMismatch',
      'IdempotencyClaimed',
      'IdempotencyReleased',
      'IdempotencyKeyInvalid',
    ]);
  });
});

describe('a handler whose step is refused for good', () => {
  const refusal = { statusCode: 422, headers: { 'Content-Type': 'application/problem+json' }, body: '{"x":1}' };
  /** Two steps, the first undone by a compensation that fails `refundFailures` times; the second refused. */
  function refusing(h: ReturnType<typeof harness>, refundFailures = 0) {
    const undone: string[] = [];
    let failures = refundFailures;
    h.set(async (ctx) => {
      await ctx.idempotency.step('charge', async () => 'ch_1', {
        compensate: async (charge) => {
          if (failures-- > 0) throw new Error('processor down');
          undone.push(charge);
        },
      });
      await ctx.idempotency.step('ship', async () => {
        throw new StepRefusedError('ship', 'no carrier', { response: refusal });
      });
      return { statusCode: 201, body: '{}' };
    });
    return undone;
  }

  it("compensates, stores the refusal's response and replays it: the request is answered, not failed", async () => {
    const h = harness();
    const undone = refusing(h);
    const key = randomUUID();
    const first = await h.call(post(key));
    expect(first).toMatchObject({ statusCode: 422, body: '{"x":1}' });
    expect(undone).toEqual(['ch_1']);
    const again = await h.call(post(key));
    expect(again).toMatchObject({ statusCode: 422, body: '{"x":1}' });
    expect(again.headers?.['Idempotent-Replayed']).toBe('true');
    expect(h.runs).toHaveLength(1);
    expect(undone).toEqual(['ch_1']);
  });

  it('answers 409 with Retry-After while a compensation fails, and finishes it on the retry', async () => {
    const h = harness();
    const undone = refusing(h, 1);
    const key = randomUUID();
    const first = await h.call(post(key));
    expect(first.statusCode).toBe(409);
    expect(problem(first).type).toMatch(/request-in-flight$/);
    expect(Number(first.headers?.['Retry-After'])).toBe(30); // a lease: the backoff's first step
    expect(undone).toEqual([]);
    const second = await h.call(post(key));
    expect(second).toMatchObject({ statusCode: 422, body: '{"x":1}' });
    expect(undone).toEqual(['ch_1']);
  });

  it('answers 409 with Retry-After for a step whose outcome is not known yet, and releases the key', async () => {
    const h = harness();
    h.set(async (ctx) => {
      await ctx.idempotency.step('ship', async () => 'shp_1', {
        resolve: async () => ({ unknown: true }),
        landsWithinMs: 0,
      });
      throw new StepOutcomeUnknownError('ship', 7_000);
    });
    const result = await h.call(post(randomUUID()));
    expect(result.statusCode).toBe(409);
    expect(result.headers?.['Retry-After']).toBe('7');
    expect(problem(result).type).toMatch(/request-in-flight$/);
  });
});

describe('a key writers contend for, and releases that did not happen', () => {
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

  it('answers a key that keeps meeting transactions with 409 and Retry-After, never a 500', async () => {
    // Real DynamoDB refuses a write to an item a transaction is writing (TransactionConflictException); a claim that
    // keeps meeting one gives up as contended. That is a duplicate in flight, not a server error.
    const h = harness({ client: localDocumentClient(client) });
    const key = randomUUID();
    const conflicts = proxy.arm({
      match: {
        name: `claim of ${key}`,
        target: DynamoDbTarget.PutItem,
        when: (body) => JSON.stringify(body).includes(key),
      },
      fault: { mode: 'error', error: 'TransactionConflictException' },
      count: 5,
    });
    const answer = await h.call(post(key));
    expect(conflicts.fired()).toBe(5);
    expect(answer.statusCode).toBe(409);
    expect(answer.headers?.['Retry-After']).toBe('1');
    expect(problem(answer).type).toBe(problemType(ProblemType.requestInFlight));
    expect(h.runs).toHaveLength(0);
  });

  it('counts a release only when one happened', async () => {
    const clock = new FakeClock();
    const metrics: string[] = [];
    const h = harness({ clock, leaseSeconds: 5, metrics });
    const key = randomUUID();
    h.set(async () => {
      if (h.runs.length === 1) {
        // This owner stalls past its lease and a retry takes the key over: the 503 it then answers releases nothing.
        clock.advance(6000);
        h.set(async () => ({ statusCode: 201, body: '{}' }));
        await h.call(post(key));
      }
      return { statusCode: 503, body: '{}' };
    });
    await h.call(post(key), 3000);
    expect(metrics).toEqual(['IdempotencyClaimed', 'IdempotencyTakeover', 'IdempotencyCommitted']);
  });
});

describe('the handle a handler sees (the engine’s, as in every adapter)', () => {
  it('stages several items in one call, and commits them all with the key', async () => {
    const h = harness();
    h.set(async (ctx) => {
      const pk = `TEST#${ctx.idempotency.downstreamKey}`;
      ctx.idempotency.stage(
        { Put: { TableName: db.effectsTable, Item: { pk, sk: 'a' } } },
        { Put: { TableName: db.effectsTable, Item: { pk, sk: 'b' } } },
      );
      return { statusCode: 201, body: '{}' };
    });
    expect((await h.call(post(randomUUID()))).statusCode).toBe(201);
    expect(await effectRows(h.runs[0]!.downstreamKey)).toBe(2);
  });

  it('caps staging at what one transaction holds: more is a 500 that releases the key', async () => {
    const h = harness();
    const key = randomUUID();
    h.set(async (ctx) => {
      const pk = `TEST#${ctx.idempotency.downstreamKey}`;
      ctx.idempotency.stage(
        ...Array.from({ length: MAX_TRANSACTION_EFFECTS + 1 }, (_, i) => ({
          Put: { TableName: db.effectsTable, Item: { pk, sk: String(i) } },
        })),
      );
      return { statusCode: 201, body: '{}' };
    });
    expect((await h.call(post(key))).statusCode).toBe(500);
    expect(await effectRows(h.runs[0]!.downstreamKey)).toBe(0);
    h.set(async () => ({ statusCode: 201, body: '{}' }));
    expect((await h.call(post(key))).statusCode).toBe(201);
    expect(h.runs.map((run) => run.attempt)).toEqual([1, 2]);
  });

  it('refuses an item staged after the handler returned, instead of losing it', async () => {
    const h = harness();
    let late: IdempotencyHandle<EffectItem> | undefined;
    h.set(async (ctx) => {
      late = ctx.idempotency;
      return { statusCode: 201, body: '{}' };
    });
    await h.call(post(randomUUID()));
    expect(() =>
      late?.stage({ Put: { TableName: db.effectsTable, Item: { pk: `TEST#${late.downstreamKey}`, sk: 'late' } } }),
    ).toThrow(StagingClosedError);
    expect(await effectRows(h.runs[0]!.downstreamKey)).toBe(0);
  });

  it('gives the key back when a middleware registered after it answers early (its after never runs)', async () => {
    const store = new DynamoDbStore({ client: doc, tableName: db.idempotencyTable, leaseSeconds: 30 });
    const metrics: string[] = [];
    const handler = middy<APIGatewayProxyEvent, APIGatewayProxyResult, Error, Ctx>(async () => ({
      statusCode: 201,
      body: '{}',
    }))
      .use(httpIdempotency({ store, metrics: { addMetric: (name) => metrics.push(name) } }))
      .use({ before: answersEarly(async () => ({ statusCode: 403, body: '{}' })) });
    const key = randomUUID();
    expect((await handler(post(key), lambdaContext() as Ctx)).statusCode).toBe(403);
    const stored = scopedKey({ accountId: 'acct_1', operation: 'POST /payments', key });
    expect(await store.get(stored)).toMatchObject({ status: RecordStatus.Released });
    expect(metrics).toEqual(['IdempotencyClaimed', 'IdempotencyReleased']);
  });
});
