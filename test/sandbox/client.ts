import { randomUUID } from 'node:crypto';
import type { Sandbox } from '../../lib/sandbox/processor';

/**
 * A client for the sandbox over real HTTP (Node's global fetch), as an application would call a processor.
 */

export interface JsonResponse<T = unknown> {
  readonly status: number;
  readonly replayed: boolean;
  readonly body: T;
}

/** The body most tests charge with; a key of their own keeps tests on a shared sandbox apart. */
export const visaCharge = { amount: 1999, currency: 'eur', source: 'tok_visa', metadata: { order: 'o-1' } };

export function newKey(label = 'key'): string {
  return `${label}-${randomUUID()}`;
}

export async function postJson<T = unknown>(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<JsonResponse<T>> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal,
  });
  return {
    status: response.status,
    replayed: response.headers.get('Idempotent-Replayed') === 'true',
    body: (await response.json()) as T,
  };
}

export function postCharge<T = Record<string, unknown>>(
  sandbox: Sandbox,
  key: string,
  body: unknown = visaCharge,
  signal?: AbortSignal,
): Promise<JsonResponse<T>> {
  return postJson<T>(`${sandbox.url}/v1/charges`, body, { 'Idempotency-Key': key }, signal);
}

export async function getJson<T = unknown>(url: string): Promise<T> {
  const response = await fetch(url);
  if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}`);
  return (await response.json()) as T;
}

export async function injectFault(sandbox: Sandbox, fault: Record<string, unknown>): Promise<void> {
  const response = await postJson(`${sandbox.url}/__faults`, fault);
  if (response.status !== 201) throw new Error(`could not inject ${JSON.stringify(fault)}: ${response.status}`);
}

/** Polls until `check` passes (it throws until then), for effects that complete after the response. */
export async function eventually(check: () => void | Promise<void>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}
