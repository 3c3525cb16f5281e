import type { DemoCharges, DemoConfig, DemoHold } from '../wire';

/**
 * The local stack's demo routes, on the page's own origin: the demo account's key, the processor's ledger for that
 * account, and the processor's fault switch. The payments API itself is only ever called through the client.
 */
export const demoApi = {
  config: () => call<DemoConfig>('GET', '/demo/config'),
  charges: () => call<DemoCharges>('GET', '/demo/charges'),
  /** Holds the processor's next charge for a while (the answer says how long): the original stays in flight. */
  holdNextCharge: () => call<DemoHold>('POST', '/demo/hold'),
  /** Arms one lost reply: the processor's next charge is made, then its answer dropped. */
  loseNextReply: () => call<unknown>('POST', '/demo/flaky'),
  /** Disarms a lost reply that no tap used. */
  clearFaults: () => call<unknown>('DELETE', '/demo/flaky'),
};

export type DemoApi = typeof demoApi;

async function call<T>(method: string, path: string): Promise<T> {
  const response = await fetch(path, { method, headers: { Accept: 'application/json' } });
  if (!response.ok) {
    const problem = (await response.json().catch(() => ({}))) as { title?: string; detail?: string };
    throw new Error(`${method} ${path}: ${response.status} ${problem.detail ?? problem.title ?? ''}`.trim());
  }
  return (await response.json()) as T;
}
