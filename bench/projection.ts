import type { MeteredRequest } from './request-meter';

/**
 * From DynamoDB Local to real DynamoDB: the requests a call makes, priced and timed with published figures.
 * These are assumptions, not measurements; each says where it comes from. Change them here and rerun.
 */
export const ASSUMPTIONS = {
  latencyMs: {
    /** GetItem, PutItem, UpdateItem, DeleteItem (conditional or not), in-region, from Lambda. */
    singleItem: 5,
    TransactWriteItems: 10,
    TransactGetItems: 10,
  },
  latencySources: [
    'AWS describes DynamoDB as delivering "single-digit millisecond performance at any scale" ' +
      '(https://aws.amazon.com/dynamodb/); 5 ms is taken for an in-region single-item request, a round figure, not a ' +
      'measurement.',
    'AWS publishes no latency for TransactWriteItems. A transaction runs a two-phase protocol (prepare on every item, ' +
      'then commit) through a transaction coordinator (Idziorek et al., "Distributed Transactions at Scale in Amazon ' +
      'DynamoDB", USENIX ATC 2023), so about two single-item round trips inside DynamoDB: 10 ms is assumed.',
  ],
  prices: {
    region: 'us-east-1',
    usdPerMillionWriteRequestUnits: 0.625,
    usdPerMillionReadRequestUnits: 0.125,
    asOf: '2024-11-01',
    source:
      'https://aws.amazon.com/dynamodb/pricing/on-demand/ (on-demand throughput prices halved from 2024-11-01: ' +
      '$1.25 to $0.625 per million WRU, $0.25 to $0.125 per million RRU in us-east-1). Storage, backups and data ' +
      'transfer are left out.',
  },
} as const;

/** What one kind of call costs, from the requests its measured calls actually made. */
export interface CallCost {
  /** The most common request sequence, e.g. `PutItem + TransactWriteItems`; a refused request is marked `(refused)`. */
  readonly mix: string;
  readonly requests: { readonly mean: number; readonly min: number; readonly max: number };
  /** Mean capacity units per call. */
  readonly units: { readonly write: number; readonly read: number };
  /** How the units were obtained: reported by DynamoDB Local, modeled by the rules, or a modeled upper bound. */
  readonly unitSources: readonly string[];
  /** Mean over calls of the assumed latency of each request, summed (requests are sequential). */
  readonly projectedMs: number;
  readonly usdPerMillionCalls: number;
}

export function callCost(calls: readonly (readonly MeteredRequest[])[]): CallCost {
  const mixes = new Map<string, number>();
  const sources = new Set<string>();
  let requests = 0;
  let min = Number.POSITIVE_INFINITY;
  let max = 0;
  let write = 0;
  let read = 0;
  let projectedMs = 0;
  for (const call of calls) {
    const mix = call.map((request) => `${request.operation}${request.error ? ' (refused)' : ''}`).join(' + ');
    mixes.set(mix, (mixes.get(mix) ?? 0) + 1);
    requests += call.length;
    min = Math.min(min, call.length);
    max = Math.max(max, call.length);
    for (const request of call) {
      write += request.units.write;
      read += request.units.read;
      sources.add(request.units.source);
      projectedMs += latencyOf(request.operation);
    }
  }
  const count = Math.max(calls.length, 1);
  const units = { write: write / count, read: read / count };
  const prices = ASSUMPTIONS.prices;
  return {
    mix: [...mixes.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] ?? '',
    requests: { mean: requests / count, min: calls.length ? min : 0, max },
    units,
    unitSources: [...sources].sort(),
    projectedMs: projectedMs / count,
    usdPerMillionCalls:
      units.write * prices.usdPerMillionWriteRequestUnits + units.read * prices.usdPerMillionReadRequestUnits,
  };
}

function latencyOf(operation: string): number {
  const { latencyMs } = ASSUMPTIONS;
  if (operation === 'TransactWriteItems') return latencyMs.TransactWriteItems;
  if (operation === 'TransactGetItems') return latencyMs.TransactGetItems;
  return latencyMs.singleItem;
}
