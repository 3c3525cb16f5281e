import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import middy from '@middy/core';
import type { ALBEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import { z } from 'zod';
import { DynamoDbStore } from '../../src/dynamodb/store';
import { accountIdOf, requireAccountId } from '../../src/http/account';
import { problemErrorHandler } from '../../src/http/error-handler';
import {
  frontDoorOf,
  type HttpEvent,
  type HttpResult,
  requestCookies,
  requestOperation,
} from '../../src/http/front-door';
import { httpIdempotency, type WithIdempotency } from '../../src/http/idempotency';
import { validateJsonBody, type WithBody } from '../../src/http/validate-body';
import { lambdaContext } from '../support/api-event';
import { testDatabase } from '../support/dynamodb';
import {
  albEvent,
  type Caller,
  functionUrlEvent,
  httpApiEvent,
  lambdaCaller,
  type RequestSpec,
  restEvent,
  TARGET_GROUP,
} from '../support/front-door-events';

/**
 * One handler, written once and left alone, behind every front door a Lambda HTTP API has: a REST API (payload 1.0),
 * an HTTP API (payload 2.0), a function URL and an ALB target (with and without multi-value headers). Each request is
 * the event that front door makes of it, as AWS documents it, and each answer must be in that front door's own
 * format, replays included. Against DynamoDB Local.
 */
const db = testDatabase();
const quiet = { warn: () => undefined, error: () => undefined };

const Body = z.strictObject({ amount: z.number().int().positive(), currency: z.string().length(3) });
type Ctx = Context & WithIdempotency<DynamoDbStore> & WithBody<z.infer<typeof Body>>;

/** An ALB passes no authorizer on: a function behind one names its caller itself. Here: one tenant per target group. */
const TENANT_OF_TARGET_GROUP: Record<string, string> = { [TARGET_GROUP]: 'acct_alb' };
const accountOf = (event: HttpEvent) =>
  frontDoorOf(event) === 'alb'
    ? TENANT_OF_TARGET_GROUP[(event as ALBEvent).requestContext.elb.targetGroupArn]
    : accountIdOf(event);

function service() {
  const store = new DynamoDbStore({ client: db.doc, tableName: db.idempotencyTable, leaseSeconds: 30 });
  const runs: string[] = [];
  const steer: { gate?: Promise<void>; fail?: boolean } = {};

  /** The handler: it answers as a REST API's proxy result would, two cookies and all, whatever the front door. */
  async function createPayment(event: HttpEvent, context: Ctx): Promise<APIGatewayProxyResult> {
    runs.push(context.idempotency.downstreamKey);
    const id = `pay_${randomUUID().slice(0, 8)}`;
    context.idempotency.stage({
      Put: { TableName: db.effectsTable, Item: { pk: `TEST#${context.idempotency.downstreamKey}`, sk: id } },
    });
    await steer.gate;
    if (steer.fail) throw new Error('ECONNRESET secret-host:5432');
    return {
      statusCode: 201,
      headers: { 'Content-Type': 'application/json', Location: `/payments/${id}` },
      multiValueHeaders: { 'Set-Cookie': ['seen=1; Path=/', 'last=a, b; Path=/'] },
      body: JSON.stringify({ id, amount: context.body.amount, account: requireAccountId(event, accountOf) }),
    };
  }

  const handler = middy<HttpEvent, HttpResult, Error, Ctx>(createPayment)
    .use(problemErrorHandler({ logger: quiet }))
    .use(validateJsonBody(Body))
    .use(httpIdempotency({ store, logger: quiet, accountId: accountOf, storedHeaders: ['Set-Cookie'] }));
  return { runs, steer, call: (event: HttpEvent) => handler(event, lambdaContext() as Ctx) };
}

type Format = 'rest' | 'payload 2.0' | 'alb' | 'alb multi-value';

/** A front door: how it shapes a request, and the format it expects back. */
interface Door {
  readonly name: string;
  readonly format: Format;
  readonly event: (spec: RequestSpec) => HttpEvent;
}

const doors: Door[] = [
  { name: 'a REST API (payload 1.0)', format: 'rest', event: (spec) => restEvent(spec, lambdaCaller('acct_1')) },
  {
    name: 'an HTTP API (payload 2.0)',
    format: 'payload 2.0',
    event: (spec) => httpApiEvent(spec, lambdaCaller('acct_1')),
  },
  {
    name: 'a function URL (IAM)',
    format: 'payload 2.0',
    event: (spec) => functionUrlEvent(spec, { kind: 'iam', accountId: '111122223333' }),
  },
  { name: 'an ALB target', format: 'alb', event: (spec) => albEvent(spec) },
  {
    name: 'an ALB target with multi-value headers',
    format: 'alb multi-value',
    event: (spec) => albEvent(spec, { multiValue: true }),
  },
];

interface Answer {
  readonly status: number;
  /** Header values by lower-case name. */
  readonly headers: Readonly<Record<string, readonly string[]>>;
  readonly body: string;
}

/** Reads an answer, checking first that it is in the format its front door expects, and only that one. */
function answerOf(format: Format, result: unknown): Answer {
  const r = result as Record<string, unknown>;
  expect(typeof r.statusCode).toBe('number');
  expect(typeof r.body).toBe('string');
  const status = r.statusCode as number;
  const fields: [string, string][] = [];
  const single = (headers: unknown) => {
    for (const [name, value] of Object.entries((headers ?? {}) as Record<string, unknown>)) {
      expect(typeof value).toBe('string');
      fields.push([name, value as string]);
    }
  };
  const multi = (headers: unknown) => {
    for (const [name, values] of Object.entries((headers ?? {}) as Record<string, unknown>)) {
      expect(Array.isArray(values)).toBe(true);
      for (const value of values as string[]) fields.push([name, value]);
    }
  };
  switch (format) {
    case 'rest':
      expect(r).not.toHaveProperty('statusDescription');
      expect(r).not.toHaveProperty('cookies');
      single(r.headers);
      multi(r.multiValueHeaders);
      break;
    case 'payload 2.0':
      // No multi-value headers in payload 2.0: cookies go in `cookies`, other repeated headers comma-joined.
      expect(r).not.toHaveProperty('multiValueHeaders');
      expect(r).not.toHaveProperty('statusDescription');
      single(r.headers);
      for (const cookie of (r.cookies ?? []) as string[]) fields.push(['set-cookie', cookie]);
      break;
    case 'alb':
    case 'alb multi-value':
      expect(r.statusDescription).toBe(`${status} ${STATUS_CODES[status]}`);
      expect(typeof r.isBase64Encoded).toBe('boolean');
      expect(r).not.toHaveProperty('cookies');
      // An ALB reads `multiValueHeaders` when the target group enables them, `headers` otherwise: never both.
      if (format === 'alb') {
        expect(r).not.toHaveProperty('multiValueHeaders');
        single(r.headers);
      } else {
        expect(r).not.toHaveProperty('headers');
        multi(r.multiValueHeaders);
      }
  }
  const headers: Record<string, string[]> = {};
  for (const [name, value] of fields) headers[name.toLowerCase()] = [...(headers[name.toLowerCase()] ?? []), value];
  return { status, headers, body: r.body as string };
}

const payment = (amount = 4200) => ({ amount, currency: 'usd' });
const post = (key: string, body: unknown = payment(), extra: Partial<RequestSpec> = {}): RequestSpec => ({
  headers: { 'Idempotency-Key': key },
  body,
  ...extra,
});
const problemType = (answer: Answer) => (JSON.parse(answer.body) as { type: string }).type;

describe.each(doors)('one handler behind $name', (door) => {
  const read = (result: unknown) => answerOf(door.format, result);

  it('runs once and replays its answer byte for byte, in this front door’s format', async () => {
    const { call, runs } = service();
    const key = randomUUID();
    const first = read(await call(door.event(post(key))));
    expect(first.status).toBe(201);
    expect(first.headers['content-type']).toEqual(['application/json']);
    expect(first.headers.location?.[0]).toMatch(/^\/payments\/pay_/);
    const replay = read(await call(door.event(post(key))));
    expect(runs).toHaveLength(1);
    expect(replay).toEqual({
      status: 201,
      headers: { ...first.headers, 'idempotent-replayed': ['true'] },
      body: first.body,
    });
    // Both cookies, each whole (one holds a comma), except where the front door can carry only one.
    expect(replay.headers['set-cookie']).toEqual(
      door.format === 'alb' ? ['last=a, b; Path=/'] : ['seen=1; Path=/', 'last=a, b; Path=/'],
    );
    expect(await db.itemsUnder(`TEST#${runs[0]}`)).toBe(1);
  });

  it('answers a duplicate in flight with 409 and Retry-After', async () => {
    const { call, runs, steer } = service();
    const key = randomUUID();
    let open!: () => void;
    steer.gate = new Promise((resolve) => {
      open = resolve;
    });
    const original = call(door.event(post(key)));
    // The original holds the key once its handler runs (or has answered: then this test fails below, not by timing out).
    for (let waited = 0; runs.length === 0 && waited < 5000; waited += 10) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const duplicate = read(await call(door.event(post(key))));
    expect(duplicate.status).toBe(409);
    expect(duplicate.headers['retry-after']).toEqual(['1']);
    expect(duplicate.headers['content-type']).toEqual(['application/problem+json']);
    expect(problemType(duplicate)).toMatch(/request-in-flight$/);
    open();
    expect(read(await original).status).toBe(201);
    expect(runs).toHaveLength(1);
  });

  it('answers the key reused with another body with 422', async () => {
    const { call, runs } = service();
    const key = randomUUID();
    expect(read(await call(door.event(post(key)))).status).toBe(201);
    const reused = read(await call(door.event(post(key, payment(1)))));
    expect(reused.status).toBe(422);
    expect(problemType(reused)).toMatch(/idempotency-key-reused$/);
    expect(runs).toHaveLength(1);
  });

  it('answers an invalid body with 400, before the key is claimed', async () => {
    const { call, runs } = service();
    const key = randomUUID();
    const invalid = read(await call(door.event(post(key, { amount: -1, currency: 'usd' }))));
    expect(invalid.status).toBe(400);
    expect(problemType(invalid)).toMatch(/invalid-body$/);
    expect(read(await call(door.event(post(key)))).status).toBe(201);
    expect(runs).toHaveLength(1);
  });

  it('answers a thrown error with a 500 that leaks nothing, and gives the key back', async () => {
    const { call, runs, steer } = service();
    const key = randomUUID();
    steer.fail = true;
    const failed = read(await call(door.event(post(key))));
    expect(failed.status).toBe(500);
    expect(failed.body).not.toMatch(/ECONNRESET|secret-host/);
    expect(problemType(failed)).toMatch(/internal-error$/);
    steer.fail = false;
    expect(read(await call(door.event(post(key)))).status).toBe(201);
    expect(runs).toEqual([runs[0], runs[0]]);
  });

  it('reads a base64-encoded body, as the same request as its text', async () => {
    const { call, runs } = service();
    const key = randomUUID();
    const encoded = read(await call(door.event(post(key, payment(), { base64: true }))));
    expect(encoded.status).toBe(201);
    expect(JSON.parse(encoded.body)).toMatchObject({ amount: 4200 });
    const text = read(await call(door.event(post(key))));
    expect(text.headers['idempotent-replayed']).toEqual(['true']);
    expect(runs).toHaveLength(1);
  });

  it('reads the key whatever the case of its header name', async () => {
    const { call, runs } = service();
    const key = randomUUID();
    await call(door.event({ body: payment(), headers: { 'IDEMPOTENCY-KEY': key } }));
    const replay = read(await call(door.event({ body: payment(), headers: { 'idempotency-key': key } })));
    expect(replay.headers['idempotent-replayed']).toEqual(['true']);
    expect(runs).toHaveLength(1);
  });
});

describe('a header sent more than once', () => {
  it('reads the same through a REST API, an HTTP API and an ALB with multi-value headers: every value', async () => {
    const { call, runs } = service();
    const part = randomUUID();
    const spec: RequestSpec = { body: payment(), headers: { 'Idempotency-Key': [`${part}-1`, `${part}-2`] } };
    // Payload 2.0 comma-joins a repeated header; payload 1.0 and the ALB hand over the list: read alike.
    const first = answerOf('rest', await call(restEvent(spec)));
    expect(first.status).toBe(201);
    const viaHttpApi = answerOf('payload 2.0', await call(httpApiEvent(spec)));
    expect(viaHttpApi.headers['idempotent-replayed']).toEqual(['true']);
    expect(runs).toHaveLength(1);
  });

  it('is read from payload 1.0’s multiValueHeaders, not only the last value its headers keep', async () => {
    const { call } = service();
    const once = randomUUID();
    await call(restEvent({ body: payment(), headers: { 'Idempotency-Key': [`${once}-a`, once] } }));
    const lastOnly = answerOf('rest', await call(restEvent({ body: payment(), headers: { 'Idempotency-Key': once } })));
    expect(lastOnly.headers['idempotent-replayed']).toBeUndefined();
  });
});

describe('the same operation through two front doors', () => {
  it('is one operation: a key sent to the REST API replays through the HTTP API', async () => {
    const { call, runs } = service();
    const key = randomUUID();
    const viaRest = answerOf('rest', await call(restEvent(post(key))));
    const viaHttpApi = answerOf('payload 2.0', await call(httpApiEvent(post(key))));
    expect(viaHttpApi.body).toBe(viaRest.body);
    expect(viaHttpApi.headers['idempotent-replayed']).toEqual(['true']);
    expect(runs).toHaveLength(1);
  });

  it('names operations by route template where there is one, else by path', () => {
    const spec: RequestSpec = { route: '/payments/{id}/refunds', path: '/payments/pay_1/refunds' };
    expect(requestOperation(restEvent(spec))).toBe('POST /payments/{id}/refunds');
    expect(requestOperation(httpApiEvent(spec))).toBe('POST /payments/{id}/refunds');
    expect(requestOperation(functionUrlEvent(spec))).toBe('POST /payments/pay_1/refunds');
    expect(requestOperation(albEvent(spec))).toBe('POST /payments/pay_1/refunds');
    // A catch-all route's template names the request's method, not ANY.
    const anyRoute = httpApiEvent({ route: '/{proxy+}', path: '/payments' });
    expect(requestOperation({ ...anyRoute, routeKey: 'ANY /{proxy+}' })).toBe('POST /{proxy+}');
    expect(requestOperation({ ...anyRoute, routeKey: '$default' })).toBe('POST /payments');
  });
});

describe('a front door with no route template', () => {
  const routeless: Door[] = [
    ...doors.filter((door) => door.name.startsWith('a function URL') || door.name.startsWith('an ALB')),
    {
      name: "an HTTP API's $default route",
      format: 'payload 2.0',
      event: (spec) => {
        const event = httpApiEvent(spec, lambdaCaller('acct_1'));
        return { ...event, routeKey: '$default', requestContext: { ...event.requestContext, routeKey: '$default' } };
      },
    },
  ];

  it.each(routeless)('names one operation by /payments, /payments/ and //payments behind $name', async (door) => {
    const { call, runs } = service();
    const key = randomUUID();
    const answers = [];
    for (const path of ['/payments', '/payments/', '//payments']) {
      answers.push(answerOf(door.format, await call(door.event(post(key, payment(), { path })))));
    }
    expect(runs).toHaveLength(1);
    expect(answers.map((answer) => answer.status)).toEqual([201, 201, 201]);
    expect(answers.map((answer) => answer.headers['idempotent-replayed'])).toEqual([undefined, ['true'], ['true']]);
    expect(new Set(answers.map((answer) => answer.body)).size).toBe(1);
  });

  it.each([
    ['/payments', '/payments'],
    ['/payments/', '/payments'],
    ['//payments//', '/payments'],
    ['/payments/./', '/payments'],
    ['/refunds/../payments', '/payments'],
    ['/../payments', '/payments'],
    ['/pay%6Dents', '/payments'],
    ['/payments/%2E/', '/payments'],
    ['/', '/'],
    ['//', '/'],
    ['/payments/pay_1/refunds/', '/payments/pay_1/refunds'],
  ])('normalizes the path %j to %j for the operation', (path, operation) => {
    expect(requestOperation(functionUrlEvent({ path }))).toBe(`POST ${operation}`);
    expect(requestOperation(albEvent({ path }))).toBe(`POST ${operation}`);
  });

  it('keeps an encoded slash, case and other encodings apart: they may name another resource', () => {
    const operation = (path: string) => requestOperation(functionUrlEvent({ path }));
    expect(operation('/a%2Fb')).toBe('POST /a%2Fb');
    expect(operation('/a%2fb')).toBe('POST /a%2Fb');
    expect(operation('/a%2Fb')).not.toBe(operation('/a/b'));
    expect(operation('/Payments')).not.toBe(operation('/payments'));
    expect(operation('/pay%20ments')).toBe('POST /pay%20ments');
  });

  it('answers 400 problem+json, storing nothing, for a path no store can keep as it is (a lone surrogate)', async () => {
    const { call, runs } = service();
    const answer = answerOf(
      'payload 2.0',
      await call(
        functionUrlEvent(post(randomUUID(), payment(), { path: '/pay\ud800' }), {
          kind: 'iam',
          accountId: '111122223333',
        }),
      ),
    );
    expect(answer.status).toBe(400);
    expect(answer.headers['content-type']).toEqual(['application/problem+json']);
    expect(JSON.parse(answer.body)).toMatchObject({
      status: 400,
      detail: expect.stringContaining('unpaired surrogate'),
    });
    expect(runs).toHaveLength(0);
  });

  it('answers 400 problem+json for a path that makes the stored key longer than a store can keep', async () => {
    const { call, runs } = service();
    const path = `/payments/${'x'.repeat(3000)}`;
    const answer = answerOf('alb', await call(albEvent(post(randomUUID(), payment(), { path }))));
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toMatchObject({ status: 400, detail: expect.stringContaining('2048-byte limit') });
    expect(runs).toHaveLength(0);
  });
});

describe('cookies a client sends', () => {
  const spec: RequestSpec = { headers: { Cookie: ['a=1; b=2', 'c=3'] } };
  it.each([
    ['a REST API', restEvent(spec)],
    ['an HTTP API, which moves them to cookies', httpApiEvent(spec)],
    ['a function URL', functionUrlEvent(spec)],
    ['an ALB with multi-value headers', albEvent(spec, { multiValue: true })],
  ])('are read through %s', (_name, event) => {
    expect(requestCookies(event)).toEqual(['a=1', 'b=2', 'c=3']);
  });

  it('are read through an ALB without multi-value headers as far as it passes them on: the last header', () => {
    expect(requestCookies(albEvent(spec))).toEqual(['c=3']);
  });
});

describe('the account a key is scoped to, from each authorizer', () => {
  const spec: RequestSpec = {};
  const iam = (cognitoIdentityId?: string): Caller => ({
    kind: 'iam',
    accountId: '111122223333',
    ...(cognitoIdentityId ? { cognitoIdentityId } : {}),
  });
  it.each([
    ['a REST API’s Lambda authorizer context', restEvent(spec, lambdaCaller('acct_r')), 'acct_r'],
    ['an HTTP API’s Lambda authorizer context', httpApiEvent(spec, lambdaCaller('acct_h')), 'acct_h'],
    ['an HTTP API’s JWT authorizer: the sub claim', httpApiEvent(spec, { kind: 'jwt', sub: 'user-7' }), 'user-7'],
    ['a REST API’s Cognito user pool authorizer: the sub claim', restEvent(spec, { kind: 'jwt', sub: 'u-8' }), 'u-8'],
    ['an HTTP API’s IAM authorizer: the caller’s account', httpApiEvent(spec, iam()), '111122223333'],
    ['a function URL’s IAM auth: the caller’s account', functionUrlEvent(spec, iam()), '111122223333'],
    ['a REST API’s IAM auth: the caller’s account', restEvent(spec, iam()), '111122223333'],
    [
      'IAM through a Cognito identity pool: the identity',
      functionUrlEvent(spec, iam('eu-west-1:id-9')),
      'eu-west-1:id-9',
    ],
    [
      'a REST API’s Cognito identity through IAM: the identity',
      restEvent(spec, iam('eu-west-1:id-3')),
      'eu-west-1:id-3',
    ],
  ])('is read from %s', (_name, event, expected) => {
    expect(accountIdOf(event)).toBe(expected);
  });

  it.each([
    ['a REST API without an authorizer', restEvent(spec, { kind: 'none' })],
    ['an HTTP API without an authorizer', httpApiEvent(spec, { kind: 'none' })],
    ['a function URL without auth', functionUrlEvent(spec)],
    ['an ALB, which passes no authorizer on', albEvent(spec)],
    ['a Lambda authorizer whose context names no account', httpApiEvent(spec, { kind: 'lambda', accountId: '' })],
  ])('is none for %s', (_name, event) => {
    expect(accountIdOf(event)).toBeUndefined();
  });

  it('keeps two JWT subjects using the same key apart', async () => {
    const { call, runs } = service();
    const key = randomUUID();
    await call(httpApiEvent(post(key), { kind: 'jwt', sub: 'user-a' }));
    const other = answerOf('payload 2.0', await call(httpApiEvent(post(key), { kind: 'jwt', sub: 'user-b' })));
    expect(other.headers['idempotent-replayed']).toBeUndefined();
    expect(runs).toHaveLength(2);
    expect(runs[0]).not.toBe(runs[1]);
  });

  it('keeps two users of one Cognito identity pool apart, though they sign as one AWS account', async () => {
    const { call, runs } = service();
    const key = randomUUID();
    await call(functionUrlEvent(post(key), iam('eu-west-1:alice')));
    const other = answerOf('payload 2.0', await call(functionUrlEvent(post(key), iam('eu-west-1:bob'))));
    expect(other.headers['idempotent-replayed']).toBeUndefined();
    expect(runs).toHaveLength(2);
  });

  it('answers 401 in an ALB’s format when nothing names the caller, and stores nothing', async () => {
    const handler = middy<HttpEvent, HttpResult>(async () => ({ statusCode: 201, body: '{}' }))
      .use(problemErrorHandler({ logger: quiet }))
      .use(
        httpIdempotency({
          store: new DynamoDbStore({ client: db.doc, tableName: db.idempotencyTable }),
          logger: quiet,
        }),
      );
    db.requests.reset();
    const answer = answerOf(
      'alb',
      await handler(albEvent(post(randomUUID())), lambdaContext() as Context & WithIdempotency<DynamoDbStore>),
    );
    expect(answer.status).toBe(401);
    expect(problemType(answer)).toMatch(/unauthenticated$/);
    expect(db.requests.sent).toEqual([]);
  });
});

describe('a handler answering in payload 2.0’s shorthand', () => {
  it('is read as API Gateway reads it (a 200 whose JSON body is the value), stored and replayed', async () => {
    const store = new DynamoDbStore({ client: db.doc, tableName: db.idempotencyTable });
    let runs = 0;
    const handler = middy<HttpEvent, unknown, Error, Context & WithIdempotency<DynamoDbStore>>(async () => {
      runs++;
      return { received: true };
    })
      .use(problemErrorHandler({ logger: quiet }))
      .use(httpIdempotency({ store, logger: quiet }));
    const key = randomUUID();
    const call = async () =>
      answerOf(
        'payload 2.0',
        await handler(httpApiEvent(post(key)), lambdaContext() as Context & WithIdempotency<DynamoDbStore>),
      );
    const first = await call();
    expect(first).toMatchObject({ status: 200, body: '{"received":true}' });
    expect(first.headers['content-type']).toEqual(['application/json']);
    const replay = await call();
    expect(replay).toMatchObject({ status: 200, body: '{"received":true}' });
    expect(replay.headers['idempotent-replayed']).toEqual(['true']);
    expect(runs).toBe(1);
  });
});
