import {
  type Attempt,
  IdempotencyProblemType,
  type OperationRequest,
  type OperationResult,
  RetrySafeClient,
  type RetrySafeClientOptions,
} from '../../src/client';
import { collectGarbage } from '../support/garbage';
import {
  created,
  idempotencyKeys,
  inFlight,
  order,
  placed,
  problem,
  readOrder,
  type Step,
  scriptedFetch,
  UNAVAILABLE,
  unavailable,
} from './scripted-fetch';

/**
 * The client against a scripted fetch, on jest's fake clock: every wait is exact, so a test can say that the client
 * waited 2000 ms, not "at least about 2 s". Promise and stream internals keep the real event loop.
 */
const START = Date.UTC(2026, 0, 1, 12, 0, 0); // on a whole second, so an HTTP-date Retry-After is exact

beforeEach(() => {
  jest.useFakeTimers({ now: START, doNotFake: ['nextTick', 'queueMicrotask', 'setImmediate'] });
});
afterEach(() => {
  jest.useRealTimers();
});

function clientFor(steps: readonly Step[], options: RetrySafeClientOptions = {}) {
  const scripted = scriptedFetch(steps);
  const client = new RetrySafeClient({
    baseUrl: 'http://127.0.0.1:3000',
    headers: { Authorization: 'Bearer sk_test_unit' },
    fetch: scripted.fetch,
    random: () => 0.5,
    ...options,
  });
  /** An order placed through the example API: POST /orders, read by `readOrder`. */
  const placeOrder = (request: Partial<OperationRequest<typeof placed, typeof order>> = {}) =>
    client.prepare({ url: 'orders', body: order, parse: readOrder, ...request });
  return { client, placeOrder, requests: scripted.requests, signals: scripted.signals };
}

/** Lets fake time pass until the operation settles; a rejection (the client must never reject) fails the test. */
async function settle<T>(pending: Promise<OperationResult<T>>): Promise<OperationResult<T> & { elapsedMs: number }> {
  let settledAt: number | undefined;
  const settled = () => {
    settledAt = Date.now();
  };
  void pending.then(settled, settled);
  while (settledAt === undefined) await jest.advanceTimersByTimeAsync(25);
  return { ...(await pending), elapsedMs: settledAt - START };
}

const waits = (attempts: readonly Attempt[]) => attempts.map((attempt) => attempt.waitedMs);
const statuses = (attempts: readonly Attempt[]) =>
  attempts.map((attempt) => (attempt.kind === 'response' ? attempt.status : attempt.error));

describe('RetrySafeClient', () => {
  describe('prepare', () => {
    it('fixes a generated key before anything is sent', () => {
      const { placeOrder, requests } = clientFor([]);
      const operation = placeOrder();
      expect(operation.idempotencyKey).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(placeOrder().idempotencyKey).not.toBe(operation.idempotencyKey);
      expect(requests).toHaveLength(0);
    });

    it("sends the caller's own key, e.g. an order id it stored", async () => {
      const { placeOrder, requests } = clientFor([created()]);
      const operation = placeOrder({ idempotencyKey: 'order-42' });
      expect(operation.idempotencyKey).toBe('order-42');
      await settle(operation.send());
      expect(idempotencyKeys(requests)).toEqual(['order-42']);
    });

    it('refuses a key the server would refuse, before sending anything', () => {
      const { placeOrder, requests } = clientFor([]);
      expect(() => placeOrder({ idempotencyKey: 'order 42' })).toThrow(TypeError);
      expect(() => placeOrder({ idempotencyKey: '' })).toThrow(TypeError);
      expect(() => placeOrder({ idempotencyKey: 'k'.repeat(256) })).toThrow(TypeError);
      expect(requests).toHaveLength(0);
    });

    it("refuses an Idempotency-Key among the headers, in any case: the key is the operation's", () => {
      const { placeOrder } = clientFor([]);
      expect(() => placeOrder({ headers: { 'idempotency-key': 'mine' } })).toThrow(TypeError);
      expect(() => clientFor([], { headers: { 'Idempotency-Key': 'mine' } })).toThrow(TypeError);
      expect(() => placeOrder({ headers: { 'Bad Header': 'x' } })).toThrow(TypeError);
    });

    it('refuses a body that has no JSON, before sending anything', () => {
      const { placeOrder, requests } = clientFor([]);
      expect(() => placeOrder({ body: { ...order, quantity: 1n } as never })).toThrow(TypeError);
      expect(requests).toHaveLength(0);
    });

    it.each([
      ['a relative path', 'https://api.example.com/prod', 'orders', 'https://api.example.com/prod/orders'],
      [
        'a path with a leading slash',
        'https://api.example.com/prod/',
        '/orders',
        'https://api.example.com/prod/orders',
      ],
      ['a path with a query', 'https://api.example.com', 'orders?dry=1', 'https://api.example.com/orders?dry=1'],
      ['an absolute URL', 'https://api.example.com/prod', 'https://other.example.com/x', 'https://other.example.com/x'],
    ])('resolves %s against the base URL, keeping its path', (_name, baseUrl, url, expected) => {
      const { placeOrder } = clientFor([], { baseUrl });
      expect(placeOrder({ url }).url).toBe(expected);
    });

    it('refuses a relative URL without a base URL', () => {
      const { placeOrder } = clientFor([], { baseUrl: undefined });
      expect(() => placeOrder({ url: 'orders' })).toThrow(TypeError);
      expect(placeOrder({ url: 'https://api.example.com/orders' }).url).toBe('https://api.example.com/orders');
    });
  });

  describe('send', () => {
    it('returns the parsed body after one attempt, with the key, the headers and the JSON body', async () => {
      const { placeOrder, requests } = clientFor([created()]);
      const operation = placeOrder();
      const result = await settle(operation.send());
      expect(result).toMatchObject({ kind: 'success', status: 201, body: placed, replayed: false });
      if (result.kind === 'success') expect(result.headers.get('location')).toBe('/orders/ord_1');
      expect(result.idempotencyKey).toBe(operation.idempotencyKey);
      expect(result.attempts).toEqual([
        {
          number: 1,
          waitedMs: 0,
          durationMs: 0,
          kind: 'response',
          status: 201,
          replayed: false,
          retryAfter: null,
          problemType: null,
        },
      ]);
      const [request] = requests;
      expect(request?.method).toBe('POST');
      expect(request?.url).toBe('http://127.0.0.1:3000/orders');
      expect(request?.headers.get('authorization')).toBe('Bearer sk_test_unit');
      expect(request?.headers.get('idempotency-key')).toBe(operation.idempotencyKey);
      expect(request?.headers.get('content-type')).toBe('application/json');
      expect(request?.headers.get('accept')).toBe('application/json, application/problem+json');
      expect(await request?.json()).toEqual(order);
    });

    it("sends the operation's method and headers, over the client's", async () => {
      const { placeOrder, requests } = clientFor([created()]);
      const operation = placeOrder({
        method: 'PATCH',
        url: 'orders/ord_1',
        headers: { authorization: 'Bearer sk_other', 'Content-Type': 'application/merge-patch+json' },
      });
      await settle(operation.send());
      expect(requests[0]?.method).toBe('PATCH');
      expect(requests[0]?.url).toBe('http://127.0.0.1:3000/orders/ord_1');
      expect(requests[0]?.headers.get('authorization')).toBe('Bearer sk_other');
      expect(requests[0]?.headers.get('content-type')).toBe('application/merge-patch+json');
    });

    it('retries a method other than POST too: the key makes it safe', async () => {
      const { placeOrder, requests } = clientFor([unavailable(503), created()]);
      expect(await settle(placeOrder({ method: 'PUT' }).send())).toMatchObject({ kind: 'success' });
      expect(requests.map((request) => request.method)).toEqual(['PUT', 'PUT']);
    });

    it('sends no body and no Content-Type for an operation without one', async () => {
      const { client, requests } = clientFor([new Response(null, { status: 204 })]);
      const result = await settle(client.prepare({ method: 'DELETE', url: 'orders/ord_1' }).send());
      expect(result).toMatchObject({ kind: 'success', status: 204, body: undefined });
      expect(requests[0]?.headers.get('content-type')).toBeNull();
      expect(await requests[0]?.text()).toBe('');
    });

    it('returns any JSON as unknown when the operation has no parse', async () => {
      const { client } = clientFor([Response.json([1, 2], { status: 200 })]);
      const result = await settle(client.prepare({ url: 'orders', body: order }).send());
      expect(result).toMatchObject({ kind: 'success', body: [1, 2] });
    });

    it('sends the body as it was when prepared, whatever happens to the object later', async () => {
      const { client, requests } = clientFor([created()]);
      const body = { sku: 'book-42', quantity: 1 };
      const operation = client.prepare({ url: 'orders', body });
      body.quantity = 2;
      await settle(operation.send());
      expect(await requests[0]?.json()).toEqual({ sku: 'book-42', quantity: 1 });
    });

    it('reports Idempotent-Replayed: true as a replay', async () => {
      const { placeOrder } = clientFor([created({ replayed: true })]);
      expect(await settle(placeOrder().send())).toMatchObject({ kind: 'success', replayed: true });
    });

    it('sends every retry with the same key and the same body', async () => {
      const { placeOrder, requests } = clientFor([
        'network-error',
        unavailable(503),
        inFlight(),
        created({ replayed: true }),
      ]);
      const operation = placeOrder();
      const result = await settle(operation.send());
      expect(result.kind).toBe('success');
      expect(idempotencyKeys(requests)).toEqual(Array(4).fill(operation.idempotencyKey));
      for (const request of requests) expect(await request.json()).toEqual(order);
    });

    it('is the same operation on a second send: same key, and the server replays', async () => {
      const { placeOrder, requests } = clientFor([created(), created({ replayed: true })]);
      const operation = placeOrder();
      await settle(operation.send());
      expect(await settle(operation.send())).toMatchObject({ kind: 'success', replayed: true });
      expect(idempotencyKeys(requests)).toEqual([operation.idempotencyKey, operation.idempotencyKey]);
    });
  });

  describe('what is retried', () => {
    it.each([
      ['409 request-in-flight', inFlight],
      ['429', () => problem(429, 'about:blank')],
      ['502', () => unavailable(502)],
      ['503', () => unavailable(503)],
      ['504', () => unavailable(504)],
    ])('retries a %s with the same key', async (_name, answer) => {
      const { placeOrder, requests } = clientFor([answer(), created()]);
      const result = await settle(placeOrder().send());
      expect(result.kind).toBe('success');
      expect(requests).toHaveLength(2);
    });

    it.each([
      [400, 'https://example.com/problems/invalid-order'],
      [401, 'about:blank'],
      [402, 'https://example.com/problems/out-of-credit'],
      [404, 'about:blank'],
      [422, IdempotencyProblemType.idempotencyKeyReused],
      [500, 'about:blank'],
    ])('returns a %i at once, as its problem, without retrying', async (status, type) => {
      const { placeOrder, requests } = clientFor([problem(status, type, {}, { balance: 0 })]);
      const result = await settle(placeOrder().send());
      expect(result).toMatchObject({ kind: 'problem', status, retryable: false, elapsedMs: 0 });
      if (result.kind === 'problem') expect(result.problem).toMatchObject({ type, status, balance: 0 });
      expect(requests).toHaveLength(1);
    });

    it('does not retry a 409 that is not request-in-flight', async () => {
      const { placeOrder, requests } = clientFor([
        problem(409, 'https://example.com/problems/conflict', { 'Retry-After': '1' }),
      ]);
      const result = await settle(placeOrder().send());
      expect(result).toMatchObject({ kind: 'problem', status: 409, retryable: false });
      expect(requests).toHaveLength(1);
    });

    it("retries the 409s the caller's isInFlight names, e.g. every bare 409 of an IETF-draft server", async () => {
      const bare = () => new Response(null, { status: 409, headers: { 'Retry-After': '1' } });
      const { placeOrder, requests } = clientFor([bare(), bare(), created()], { isInFlight: () => true });
      const result = await settle(placeOrder().send());
      expect(result).toMatchObject({ kind: 'success', elapsedMs: 2000 });
      expect(requests).toHaveLength(3);
    });

    it('retries a network error and an attempt that outlives attemptTimeoutMs', async () => {
      const { placeOrder } = clientFor(['network-error', 'hang', created()], { retry: { attemptTimeoutMs: 3000 } });
      const result = await settle(placeOrder().send());
      expect(result.kind).toBe('success');
      expect(statuses(result.attempts)).toEqual(['network', 'timeout', 201]);
      expect(result.attempts[1]?.durationMs).toBe(3000);
    });

    it('gives up after maxAttempts with the last problem, marked retryable', async () => {
      const { placeOrder, requests } = clientFor([unavailable(503), unavailable(503), unavailable(502)], {
        retry: { maxAttempts: 3 },
      });
      const result = await settle(placeOrder().send());
      expect(result).toMatchObject({ kind: 'problem', status: 502, retryable: true });
      expect(requests).toHaveLength(3);
    });

    it('gives up after maxAttempts of network errors with no answer', async () => {
      const { placeOrder } = clientFor(['network-error', 'network-error'], { retry: { maxAttempts: 2 } });
      expect(await settle(placeOrder().send())).toMatchObject({ kind: 'no-answer', reason: 'network' });
    });

    it("turns an error page that isn't problem+json into a minimal problem", async () => {
      const { placeOrder } = clientFor([new Response('<h1>Not here</h1>', { status: 404, statusText: 'Not Found' })]);
      const result = await settle(placeOrder().send());
      expect(result).toMatchObject({
        kind: 'problem',
        problem: { type: 'about:blank', title: 'Not Found', status: 404 },
      });
    });
  });

  describe('how long it waits', () => {
    it('waits the seconds a Retry-After gives, exactly: no jitter', async () => {
      const { placeOrder } = clientFor([unavailable(503, { 'Retry-After': '2' }), inFlight('1'), created()]);
      const result = await settle(placeOrder().send());
      expect(waits(result.attempts)).toEqual([0, 2000, 1000]);
      expect(result.attempts[0]).toMatchObject({ retryAfter: '2', problemType: UNAVAILABLE });
    });

    it('waits until the HTTP-date a Retry-After gives', async () => {
      const at = new Date(START + 3000).toUTCString();
      const { placeOrder } = clientFor([unavailable(503, { 'Retry-After': at }), created()]);
      const result = await settle(placeOrder().send());
      expect(waits(result.attempts)).toEqual([0, 3000]);
      expect(result.attempts[0]).toMatchObject({ retryAfter: at });
    });

    it('honours a Retry-After longer than its own backoff cap', async () => {
      const { placeOrder } = clientFor([unavailable(503, { 'Retry-After': '5' }), created()], {
        retry: { maxDelayMs: 1000 },
      });
      expect(waits((await settle(placeOrder().send())).attempts)).toEqual([0, 5000]);
    });

    it('ignores an unusable Retry-After and backs off instead', async () => {
      const { placeOrder } = clientFor([unavailable(503, { 'Retry-After': 'soon' }), created()], {
        retry: { baseDelayMs: 400 },
      });
      const result = await settle(placeOrder().send());
      expect(waits(result.attempts)).toEqual([0, 200]); // random 0.5 of the first ceiling, 400
      expect(result.attempts[0]).toMatchObject({ retryAfter: null });
    });

    it('backs off with full jitter without a Retry-After: a random share of a doubling, capped ceiling', async () => {
      const draws = [0.5, 0.25, 0.999, 0.1];
      const { placeOrder } = clientFor(
        ['network-error', 'network-error', 'network-error', 'network-error', created()],
        {
          random: () => draws.shift() ?? 0,
          retry: { baseDelayMs: 1000, maxDelayMs: 3000 },
        },
      );
      const result = await settle(placeOrder().send());
      // ceilings 1000, 2000, 4000 -> capped 3000, 8000 -> capped 3000
      expect(waits(result.attempts)).toEqual([0, 500, 500, 2997, 300]);
    });
  });

  describe('a wait longer than the deadline allows', () => {
    it('ends at once with retry-later and when to come back, rather than waiting out the deadline', async () => {
      const { placeOrder, requests } = clientFor([unavailable(503, { 'Retry-After': '30' }), created()], {
        retry: { deadlineMs: 5000 },
      });
      const result = await settle(placeOrder().send());
      expect(result).toMatchObject({ kind: 'retry-later', status: 503, retryAt: START + 30_000, elapsedMs: 0 });
      if (result.kind === 'retry-later') expect(result.problem.type).toBe(UNAVAILABLE);
      expect(statuses(result.attempts)).toEqual([503]);
      expect(requests).toHaveLength(1);
    });

    it('never retries early on a Retry-After of valid delay-seconds that reads like a timestamp (55 years)', async () => {
      // ky takes a number of seconds past 2024-01-01 as epoch seconds, and retried this one after about 5 ms.
      const { placeOrder, requests } = clientFor([unavailable(503, { 'Retry-After': '1750000000' }), created()]);
      const result = await settle(placeOrder().send());
      expect(result).toMatchObject({ kind: 'retry-later', status: 503, retryAt: START + 1_750_000_000_000 });
      expect(requests).toHaveLength(1);
    });

    it('takes an HTTP-date past the deadline as the time to come back', async () => {
      const at = new Date(START + 2 * 3_600_000).toUTCString();
      const { placeOrder, requests } = clientFor([problem(429, 'about:blank', { 'Retry-After': at }), created()]);
      const result = await settle(placeOrder().send());
      expect(result).toMatchObject({ kind: 'retry-later', status: 429, retryAt: START + 2 * 3_600_000 });
      expect(requests).toHaveLength(1);
    });

    it('applies to a duplicate in flight too', async () => {
      const { placeOrder, requests } = clientFor([inFlight('120'), created()]);
      const result = await settle(placeOrder().send());
      expect(result).toMatchObject({ kind: 'retry-later', status: 409, retryAt: START + 120_000 });
      expect(requests).toHaveLength(1);
    });

    it('still waits a Retry-After that fits in what is left of the deadline', async () => {
      const { placeOrder } = clientFor([unavailable(503, { 'Retry-After': '4' }), created()], {
        retry: { deadlineMs: 5000 },
      });
      const result = await settle(placeOrder().send());
      expect(result).toMatchObject({ kind: 'success', elapsedMs: 4000 });
      expect(waits(result.attempts)).toEqual([0, 4000]);
    });
  });

  describe('an answer that is not what it claims', () => {
    it.each([
      ['an empty 201', new Response('', { status: 201 }), 'empty-body'],
      ['a 201 whose body is not JSON', new Response('<h1>Created</h1>', { status: 201 }), 'not-json'],
      ['a 200 with null', Response.json(null, { status: 200 }), 'rejected'],
      ['a 201 with an order missing its id', Response.json({ ...placed, id: undefined }, { status: 201 }), 'rejected'],
      ['a 204 where an order was due', new Response(null, { status: 204 }), 'rejected'],
    ])('reports %s as an invalid response, not a success and not a throw', async (_name, answer, reason) => {
      const { placeOrder, requests } = clientFor([answer, created()]);
      const operation = placeOrder();
      const result = await settle(operation.send());
      expect(result).toMatchObject({ kind: 'invalid-response', status: answer.status, reason });
      expect(result).toMatchObject({ idempotencyKey: operation.idempotencyKey });
      expect(statuses(result.attempts)).toEqual([answer.status]);
      expect(requests).toHaveLength(1);
    });

    it("says why, with the parse's own words", async () => {
      const { placeOrder } = clientFor([Response.json({ sku: 'book-42' }, { status: 201 })]);
      expect(await settle(placeOrder().send())).toMatchObject({
        kind: 'invalid-response',
        detail: "the 201 answer's body was refused: not an order",
      });
    });
  });

  describe('deadline', () => {
    it('stops at the deadline in the middle of a backoff wait, without another attempt', async () => {
      const { placeOrder, requests } = clientFor(['network-error', created()], {
        retry: { deadlineMs: 2000, baseDelayMs: 10_000 },
      });
      const result = await settle(placeOrder().send());
      expect(result).toMatchObject({ kind: 'no-answer', reason: 'deadline', elapsedMs: 2000 });
      expect(requests).toHaveLength(1);
    });

    it('stops at the deadline in the middle of a slow attempt, and cancels it', async () => {
      const { placeOrder, signals } = clientFor(['hang'], { retry: { deadlineMs: 2000, attemptTimeoutMs: 10_000 } });
      const result = await settle(placeOrder().send());
      expect(result).toMatchObject({ kind: 'no-answer', reason: 'deadline', elapsedMs: 2000 });
      expect(statuses(result.attempts)).toEqual(['deadline']);
      expect(signals[0]?.aborted).toBe(true);
    });

    it('stops at the deadline in the middle of a retried attempt, even after a garbage collection', async () => {
      // A retried attempt is sent as a clone of the request, and in Node's fetch a clone's signal stops following its
      // source after a GC (nodejs/undici#4068): an abort that rides on it never reaches the attempt.
      const { placeOrder, signals } = clientFor(['network-error', 'hang'], {
        retry: { deadlineMs: 2000, attemptTimeoutMs: 10_000 },
      });
      const pending = placeOrder().send();
      await jest.advanceTimersByTimeAsync(1000); // the network error, a backoff of 125 ms, then the hanging retry
      collectGarbage();
      const result = await settle(pending);
      expect(result).toMatchObject({ kind: 'no-answer', reason: 'deadline', elapsedMs: 2000 });
      expect(statuses(result.attempts)).toEqual(['network', 'deadline']);
      expect(signals[1]?.aborted).toBe(true);
    });

    it('leaves no timer behind once the operation is over', async () => {
      const { placeOrder } = clientFor([created()]);
      await settle(placeOrder().send());
      expect(jest.getTimerCount()).toBe(0);
    });
  });

  describe('abort', () => {
    it('stops during a wait when the caller aborts, without another attempt', async () => {
      const { placeOrder, requests } = clientFor([unavailable(503, { 'Retry-After': '10' })]);
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 1000);
      const result = await settle(placeOrder().send({ signal: controller.signal }));
      expect(result).toMatchObject({ kind: 'no-answer', reason: 'aborted', elapsedMs: 1000 });
      expect(requests).toHaveLength(1);
    });

    it('cancels the attempt in flight when the caller aborts', async () => {
      const { placeOrder, signals } = clientFor(['hang']);
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 700);
      const result = await settle(placeOrder().send({ signal: controller.signal }));
      expect(result).toMatchObject({ kind: 'no-answer', reason: 'aborted', elapsedMs: 700 });
      expect(statuses(result.attempts)).toEqual(['aborted']);
      expect(signals[0]?.aborted).toBe(true);
    });

    it('cancels a retried attempt when the caller aborts, even after a garbage collection', async () => {
      const { placeOrder, signals } = clientFor(['network-error', 'hang']);
      const controller = new AbortController();
      const pending = placeOrder().send({ signal: controller.signal });
      await jest.advanceTimersByTimeAsync(1000);
      collectGarbage();
      controller.abort();
      const result = await settle(pending);
      expect(result).toMatchObject({ kind: 'no-answer', reason: 'aborted', elapsedMs: 1000 });
      expect(statuses(result.attempts)).toEqual(['network', 'aborted']);
      expect(signals[1]?.aborted).toBe(true);
    });

    it('sends nothing for a signal that is already aborted', async () => {
      const { placeOrder, requests } = clientFor([created()]);
      const result = await settle(placeOrder().send({ signal: AbortSignal.abort() }));
      expect(result).toMatchObject({ kind: 'no-answer', reason: 'aborted', attempts: [] });
      expect(requests).toHaveLength(0);
    });
  });

  describe('onAttempt', () => {
    it('is told of each attempt as it ends', async () => {
      const { placeOrder } = clientFor([inFlight('1'), created({ replayed: true })]);
      const seen: Attempt[] = [];
      const result = await settle(placeOrder().send({ onAttempt: (attempt) => seen.push(attempt) }));
      expect(seen).toEqual(result.attempts);
      expect(seen.map((attempt) => attempt.kind === 'response' && attempt.replayed)).toEqual([false, true]);
    });

    it('cannot turn a success into a retry by throwing', async () => {
      const { placeOrder, requests } = clientFor([created()]);
      const throwing = () => {
        throw new Error('a logging bug');
      };
      expect(await settle(placeOrder().send({ onAttempt: throwing }))).toMatchObject({
        kind: 'success',
      });
      expect(requests).toHaveLength(1);
    });
  });

  describe('options', () => {
    it('refuses a policy that cannot work, and a base URL that is not one', () => {
      expect(() => new RetrySafeClient({ retry: { maxAttempts: 0 } })).toThrow(RangeError);
      expect(() => new RetrySafeClient({ retry: { maxAttempts: 1.5 } })).toThrow(RangeError);
      expect(() => new RetrySafeClient({ retry: { deadlineMs: Number.NaN } })).toThrow(RangeError);
      expect(() => new RetrySafeClient({ baseUrl: 'not a url' })).toThrow(TypeError);
    });
  });
});
