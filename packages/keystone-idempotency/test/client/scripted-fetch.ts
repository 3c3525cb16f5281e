import { type Fetch, IdempotencyProblemType } from '../../src/client';

/**
 * A `fetch` that answers from a script, one step per call, and keeps every request it was sent. It honours the
 * caller's signal the way a real fetch does, so timeouts, deadlines and aborts reach it as they would the network.
 *
 * It listens on the signal it was given, not on the signal of its own copy of the request: a copy's signal follows
 * the original through a weak reference in Node's fetch (nodejs/undici#4068), and once the copy's controller is
 * collected an abort no longer reaches it.
 */
export type Step = Response | 'network-error' | 'hang';

export interface ScriptedFetch {
  readonly fetch: Fetch;
  /** Each request as sent (method, URL, headers, body). */
  readonly requests: Request[];
  /** The signal each request was sent with, by the caller (ky): what an abort or a timeout fires. */
  readonly signals: AbortSignal[];
}

export function scriptedFetch(steps: readonly Step[]): ScriptedFetch {
  const script = [...steps];
  const requests: Request[] = [];
  const signals: AbortSignal[] = [];
  const fetch: Fetch = async (input, init) => {
    const signal = init?.signal ?? (input instanceof Request ? input.signal : new AbortController().signal);
    requests.push(new Request(input, init));
    signals.push(signal);
    const step = script.shift();
    if (step === undefined) throw new Error(`the script has no step for request ${requests.length}`);
    signal.throwIfAborted();
    if (step === 'network-error') throw new TypeError('fetch failed');
    if (step === 'hang') {
      return new Promise<Response>((_resolve, reject) => {
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    }
    return step;
  };
  return { fetch, requests, signals };
}

/** An order, the example operation of these tests: the client knows nothing of what it sends. */
export const order = { sku: 'book-42', quantity: 1 } as const;

/** What the example API answers for it. */
export const placed = { id: 'ord_1', sku: 'book-42', quantity: 1, status: 'placed' };

export const UNAVAILABLE = 'https://example.com/problems/dependency-unavailable';

/** The parse an operation on the example API passes: an order with an id, or a throw. */
export function readOrder(body: unknown): typeof placed {
  if (typeof body !== 'object' || body === null || typeof (body as { id?: unknown }).id !== 'string') {
    throw new TypeError('not an order');
  }
  return body as typeof placed;
}

export function created(options: { replayed?: boolean } = {}): Response {
  const headers: Record<string, string> = { 'Content-Type': 'application/json', Location: '/orders/ord_1' };
  if (options.replayed) headers['Idempotent-Replayed'] = 'true';
  return new Response(JSON.stringify(placed), { status: 201, headers });
}

export function problem(
  status: number,
  type: string,
  headers: Record<string, string> = {},
  extensions: Record<string, unknown> = {},
): Response {
  return new Response(JSON.stringify({ type, title: `status ${status}`, status, ...extensions }), {
    status,
    headers: { 'Content-Type': 'application/problem+json', ...headers },
  });
}

export function inFlight(retryAfter = '1'): Response {
  return problem(409, IdempotencyProblemType.requestInFlight, { 'Retry-After': retryAfter });
}

export function unavailable(status = 503, headers: Record<string, string> = {}): Response {
  return problem(status, UNAVAILABLE, headers);
}

export function idempotencyKeys(requests: readonly Request[]): (string | null)[] {
  return requests.map((request) => request.headers.get('idempotency-key'));
}
