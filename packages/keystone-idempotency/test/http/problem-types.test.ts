import { randomUUID } from 'node:crypto';
import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import { z } from 'zod';
import { DynamoDbStore } from '../../src/dynamodb/store';
import { ConfigurationError } from '../../src/engine/errors';
import { problemErrorHandler } from '../../src/http/error-handler';
import { HttpProblem } from '../../src/http/errors';
import { httpIdempotency, type WithIdempotency } from '../../src/http/idempotency';
import { DEFAULT_PROBLEM_TYPE_BASE, isProblemOf, ProblemType } from '../../src/http/problem-types';
import { validateJsonBody, type WithBody } from '../../src/http/validate-body';
import { apiEvent, lambdaContext } from '../support/api-event';
import { testDatabase } from '../support/dynamodb';

/**
 * The adapter answers its own problems under the base the service sets on the problem handler, whichever of its
 * middlewares answers: the problem handler itself, body validation, or the idempotency middleware (early answers,
 * which skip every `after`).
 */
const db = testDatabase();
const quiet = { error: () => undefined, warn: () => undefined };
const BASE = 'https://api.example.com/problems/';

type Ctx = Context & WithBody<{ amount: number; fail?: string }> & WithIdempotency<DynamoDbStore>;

function service(options: { problemTypeBase?: string; work?: () => Promise<void> }) {
  const handler = middy<APIGatewayProxyEvent, APIGatewayProxyResult, Error, Ctx>(
    async (_event: APIGatewayProxyEvent, context: Ctx) => {
      await options.work?.();
      if (context.body.fail === 'slug') throw new HttpProblem(404, 'not-found', 'Not found');
      if (context.body.fail === 'uri') throw new HttpProblem(409, 'urn:example:conflict', 'Conflict');
      if (context.body.fail === 'crash') throw new Error('boom');
      return { statusCode: 201, headers: { 'Content-Type': 'application/json' }, body: '{}' };
    },
  )
    .use(problemErrorHandler({ logger: quiet, ...options }))
    .use(validateJsonBody(z.strictObject({ amount: z.number(), fail: z.optional(z.string()) })))
    .use(
      httpIdempotency({ store: new DynamoDbStore({ client: db.doc, tableName: db.idempotencyTable }), logger: quiet }),
    );
  return (event: APIGatewayProxyEvent) => handler(event, lambdaContext() as Ctx);
}

const post = (body: unknown, headers: Record<string, string> = { 'Idempotency-Key': randomUUID() }) =>
  apiEvent({ body, headers });
const typeOf = (response: APIGatewayProxyResult) => (JSON.parse(response.body) as { type: string }).type;

describe("the adapter's problem types under a base the service sets", () => {
  // Built per call: the test table exists only once the suite has started.
  const call = (event: APIGatewayProxyEvent) => service({ problemTypeBase: BASE })(event);

  it.each([
    ['a missing key', post({ amount: 1 }, {}), 400, ProblemType.idempotencyKeyMissing],
    ['an invalid key', post({ amount: 1 }, { 'Idempotency-Key': '' }), 400, ProblemType.idempotencyKeyInvalid],
    ['a body that breaks the schema', post({ amount: 'one' }), 400, ProblemType.invalidBody],
    [
      'a body in latin-1',
      post({ amount: 1 }, { 'Idempotency-Key': randomUUID(), 'Content-Type': 'application/json; charset=latin1' }),
      415,
      ProblemType.unsupportedMediaType,
    ],
    [
      'no account',
      { ...post({ amount: 1 }), requestContext: { ...post({}).requestContext, authorizer: null } },
      401,
      ProblemType.unauthenticated,
    ],
    ['an unexpected failure', post({ amount: 1, fail: 'crash' }), 500, ProblemType.internal],
  ])('answers %s under it', async (_name, event, status, slug) => {
    const response = await call(event);
    expect(response.statusCode).toBe(status);
    expect(typeOf(response)).toBe(`${BASE}${slug}`);
  });

  it('answers a reused key under it', async () => {
    const headers = { 'Idempotency-Key': randomUUID() };
    expect((await call(post({ amount: 1 }, headers))).statusCode).toBe(201);
    const reused = await call(post({ amount: 2 }, headers));
    expect(reused.statusCode).toBe(422);
    expect(typeOf(reused)).toBe(`${BASE}${ProblemType.idempotencyKeyReused}`);
  });

  it('answers a duplicate in flight under it', async () => {
    let started: () => void = () => undefined;
    let release: () => void = () => undefined;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow = service({
      problemTypeBase: BASE,
      work: async () => {
        started();
        await held;
      },
    });
    const event = post({ amount: 1 });
    const first = slow(event);
    await running;
    const duplicate = await slow({ ...event, requestContext: { ...event.requestContext, requestId: randomUUID() } });
    release();
    expect((await first).statusCode).toBe(201);
    expect(duplicate.statusCode).toBe(409);
    expect(typeOf(duplicate)).toBe(`${BASE}${ProblemType.requestInFlight}`);
  });

  it("writes a service's own slug, thrown in an HttpProblem, under it, and a full URI as it is", async () => {
    expect(typeOf(await call(post({ amount: 1, fail: 'slug' })))).toBe(`${BASE}not-found`);
    expect(typeOf(await call(post({ amount: 1, fail: 'uri' })))).toBe('urn:example:conflict');
  });
});

describe('the default base', () => {
  it('is the documented one when the service sets none', async () => {
    const response = await service({})(post({ amount: 1 }, {}));
    expect(typeOf(response)).toBe('https://keystone-idempotency.dev/problems/idempotency-key-missing');
    expect(DEFAULT_PROBLEM_TYPE_BASE).toBe('https://keystone-idempotency.dev/problems/');
  });
});

describe('problemTypeBase', () => {
  it.each(['/problems/', 'problems', 'https://api.example.com/problems'])('refuses %j', (base) => {
    expect(() => problemErrorHandler({ problemTypeBase: base })).toThrow(ConfigurationError);
  });

  it.each(['https://api.example.com/problems/', 'urn:example:problem:', 'https://api.example.com/errors#'])(
    'takes %j',
    (base) => {
      expect(() => problemErrorHandler({ problemTypeBase: base })).not.toThrow();
      expect(isProblemOf(`${base}request-in-flight`, ProblemType.requestInFlight)).toBe(true);
    },
  );
});

describe('isProblemOf', () => {
  it('matches the slug as the last segment only', () => {
    expect(isProblemOf('https://x.example/problems/request-in-flight', 'request-in-flight')).toBe(true);
    expect(isProblemOf('request-in-flight', 'request-in-flight')).toBe(true);
    expect(isProblemOf('https://x.example/problems/not-request-in-flight', 'request-in-flight')).toBe(false);
    expect(isProblemOf('https://x.example/problems/request-in-flight/more', 'request-in-flight')).toBe(false);
  });
});
