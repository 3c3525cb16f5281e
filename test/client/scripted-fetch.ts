import type { Fetch } from '../../lib/client';
import { ProblemType } from '../../lib/client';

/**
 * A `fetch` that answers from a script, one step per call, and keeps every request it was sent. It honours the
 * request's signal the way a real fetch does, so timeouts, deadlines and aborts reach it as they would the network.
 */
export type Step = Response | 'network-error' | 'hang';

export interface ScriptedFetch {
  readonly fetch: Fetch;
  readonly requests: Request[];
}

export function scriptedFetch(steps: readonly Step[]): ScriptedFetch {
  const script = [...steps];
  const requests: Request[] = [];
  const fetch: Fetch = async (input, init) => {
    const request = new Request(input, init);
    requests.push(request);
    const step = script.shift();
    if (step === undefined) throw new Error(`the script has no step for request ${requests.length}`);
    request.signal.throwIfAborted();
    if (step === 'network-error') throw new TypeError('fetch failed');
    if (step === 'hang') {
      return new Promise<Response>((_resolve, reject) => {
        request.signal.addEventListener('abort', () => reject(request.signal.reason), { once: true });
      });
    }
    return step;
  };
  return { fetch, requests };
}

export const card = { amount: 4200, currency: 'usd', source: 'tok_visa' } as const;

export const payment = {
  id: 'pay_1',
  amount: 4200,
  currency: 'usd',
  source: 'tok_visa',
  description: null,
  status: 'succeeded',
  charge_id: 'ch_1',
  created_at: '2026-01-01T00:00:00.000Z',
  settled_at: null,
};

export function created(options: { replayed?: boolean } = {}): Response {
  const headers: Record<string, string> = { 'Content-Type': 'application/json', Location: '/payments/pay_1' };
  if (options.replayed) headers['Idempotent-Replayed'] = 'true';
  return new Response(JSON.stringify(payment), { status: 201, headers });
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
  return problem(409, ProblemType.requestInFlight, { 'Retry-After': retryAfter });
}

export function unavailable(status = 503, headers: Record<string, string> = {}): Response {
  return problem(status, ProblemType.processorUnavailable, headers);
}

export function idempotencyKeys(requests: readonly Request[]): (string | null)[] {
  return requests.map((request) => request.headers.get('idempotency-key'));
}
