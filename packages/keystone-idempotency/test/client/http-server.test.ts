import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RetrySafeClient } from '../../src/client';
import { collectGarbage } from '../support/garbage';
import { order, placed, readOrder } from './scripted-fetch';

/**
 * The client against a real HTTP server on loopback, with the real `fetch`, the real ky and real timers: what a
 * scripted fetch could get subtly wrong (how a body, a header or a lost connection really reaches the client).
 */
type Answer = (request: IncomingMessage, response: ServerResponse) => void;

let server: Server;
let baseUrl: string;
let answers: Answer[];
let received: { key: string | undefined; at: number }[];

beforeAll(async () => {
  server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      received.push({ key: request.headers['idempotency-key'] as string | undefined, at: Date.now() });
      const answer = answers.shift();
      if (answer) answer(request, response);
      else response.writeHead(500).end('the test has no answer for this request');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  answers = [];
  received = [];
});

/** An order placed through a new client, as an application would after a reload. */
const placeOrder = () => new RetrySafeClient({ baseUrl }).prepare({ url: 'orders', body: order, parse: readOrder });

function json(status: number, body: unknown, headers: Record<string, string> = {}): Answer {
  return (_request, response) => {
    response.writeHead(status, { 'Content-Type': 'application/json', ...headers }).end(JSON.stringify(body));
  };
}

function unavailable(retryAfter: string): Answer {
  return (_request, response) => {
    response
      .writeHead(503, { 'Content-Type': 'application/problem+json', 'Retry-After': retryAfter })
      .end(JSON.stringify({ type: 'about:blank', title: 'Service Unavailable', status: 503 }));
  };
}

describe('RetrySafeClient over real HTTP', () => {
  it('comes back later, not after a few milliseconds, when Retry-After is 1750000000 seconds', async () => {
    answers = [unavailable('1750000000'), json(201, placed)];
    const before = Date.now();
    const result = await placeOrder().send();
    expect(result.kind).toBe('retry-later');
    if (result.kind === 'retry-later') expect(result.retryAt).toBeGreaterThanOrEqual(before + 1_750_000_000_000);
    expect(received).toHaveLength(1);
  });

  it('waits a short Retry-After for real, then succeeds under the same key', async () => {
    answers = [unavailable('1'), json(201, placed)];
    const result = await placeOrder().send();
    expect(result).toMatchObject({ kind: 'success', body: placed });
    expect(received).toHaveLength(2);
    expect(received[1]?.key).toBe(received[0]?.key);
    expect((received[1]?.at ?? 0) - (received[0]?.at ?? 0)).toBeGreaterThanOrEqual(990);
  });

  it.each([
    ['an empty 201', ((_request, response) => response.writeHead(201).end()) as Answer, 'empty-body'],
    [
      'a 201 that is not JSON',
      ((_request, response) => response.writeHead(201, { 'Content-Type': 'text/html' }).end('<p>ok</p>')) as Answer,
      'not-json',
    ],
    ['a 200 with null', json(200, null), 'rejected'],
  ])('reports %s as an invalid response, without retrying', async (_name, answer, reason) => {
    answers = [answer, json(201, placed)];
    const result = await placeOrder().send();
    expect(result).toMatchObject({ kind: 'invalid-response', reason });
    expect(received).toHaveLength(1);
  });

  it('cancels a retried attempt on the wire when the caller aborts, even after a garbage collection', async () => {
    // Node's fetch loses the abort of a cloned request after a GC (nodejs/undici#4068); ky sends every retry as one.
    let closed: Promise<number> | undefined;
    const hang: Answer = (request) => {
      closed = new Promise((resolve) => request.socket.once('close', () => resolve(Date.now())));
    };
    answers = [unavailable('0'), hang];
    const controller = new AbortController();
    const operation = new RetrySafeClient({ baseUrl, retry: { attemptTimeoutMs: 10_000 } }).prepare({
      url: 'orders',
      body: order,
      parse: readOrder,
    });
    const pending = operation.send({ signal: controller.signal });
    while (received.length < 2) await new Promise((resolve) => setTimeout(resolve, 10));
    collectGarbage();
    const abortedAt = Date.now();
    controller.abort();
    const result = await pending;
    expect(result).toMatchObject({ kind: 'no-answer', reason: 'aborted' });
    expect(Date.now() - abortedAt).toBeLessThan(2000);
    expect((await closed) ?? Number.POSITIVE_INFINITY).toBeLessThan(abortedAt + 2000);
  });

  it('retries a connection dropped before the answer, under the same key', async () => {
    answers = [(request) => request.socket.destroy(), json(201, placed)];
    const result = await placeOrder().send();
    expect(result).toMatchObject({ kind: 'success', body: placed });
    if (result.kind === 'success') expect(result.attempts[0]).toMatchObject({ kind: 'error', error: 'network' });
    expect(received.map((request) => request.key)).toEqual([received[0]?.key, received[0]?.key]);
  });
});
