import { randomUUID } from 'node:crypto';
import { interleave, type LatencySummary, now, summarize } from './measure';
import { CARD, OTHER_CARD, type PaymentEvent, paymentEvent } from './payment-flow';
import type { MeteredRequest } from './request-meter';
import type { CallOptions, CallOutcome, Variant, VariantName, Work } from './variants';

export const PATH_NAMES = ['first', 'first_outside', 'replay', 'replay_cached', 'in_flight', 'mismatch'] as const;
export type PathName = (typeof PATH_NAMES)[number];

export const PATH_LABELS: Record<PathName, string> = {
  first: 'first request',
  first_outside: 'first request, outside effect only',
  replay: 'replay',
  replay_cached: 'replay, cache hit',
  in_flight: 'in-flight duplicate',
  mismatch: 'mismatch (same key, other body)',
};

/** What each path sends, what every call must end as, and what work an idempotent variant does on it. */
interface PathSpec {
  readonly expected: CallOutcome;
  /** A duplicate path: the effect must never run. */
  readonly duplicate: boolean;
  readonly work: Work;
  /** Variants that have this path: an outside effect only is no path for the purely local variant. */
  readonly variants?: readonly VariantName[];
  /**
   * The idempotent variants run with their local cache of completed records (ours: `ReplayCache`; Powertools:
   * `useLocalCache`), warm: the key was completed, and replayed once, in this process.
   */
  readonly cached?: boolean;
}

const PATHS: Record<PathName, PathSpec> = {
  first: { expected: 'created', duplicate: false, work: 'charge-and-row' },
  // The common Powertools use: the handler calls an outside system and the response is stored; nothing else is
  // written. The baseline still does what it always does (the charge and one PutItem): the reference write.
  first_outside: {
    expected: 'created',
    duplicate: false,
    work: 'charge-only',
    variants: ['baseline', 'powertools', 'ours-external', 'powertools-indexed', 'ours-recoverable'],
  },
  replay: { expected: 'replay', duplicate: true, work: 'charge-and-row' },
  replay_cached: { expected: 'replay', duplicate: true, work: 'charge-and-row', cached: true },
  in_flight: { expected: 'in_flight', duplicate: true, work: 'charge-and-row' },
  mismatch: { expected: 'mismatch', duplicate: true, work: 'charge-and-row' },
};

/** Without idempotency every call is a first request: a duplicate is simply another payment. */
const expected = (variant: Variant, path: PathName): CallOutcome =>
  variant.idempotent ? PATHS[path].expected : 'created';

/** The variants that take part in a path. */
export function variantsOn(path: PathName, variants: readonly Variant[]): Variant[] {
  const names = PATHS[path].variants;
  return names ? variants.filter((variant) => names.includes(variant.name)) : [...variants];
}

/** Whether a path's calls are duplicates of a completed or running operation (the effect must not run). */
export function isDuplicatePath(path: PathName): boolean {
  return PATHS[path].duplicate;
}

/** One variant on one path: latency, and the DynamoDB requests and capacity of every measured call. */
export interface PathResult {
  readonly variant: VariantName;
  readonly path: PathName;
  readonly latencyMs: LatencySummary;
  /** Every measured call's latency, in the order measured. */
  readonly samples: readonly number[];
  /** The DynamoDB requests of each measured call, in order. */
  readonly calls: readonly (readonly MeteredRequest[])[];
  /** Calls that ended other than the path expects (a replay that ran the handler, an error, ...). */
  readonly unexpected: Readonly<Partial<Record<CallOutcome, number>>>;
  /** Times the effect ran during measured calls of a path on which it must not (replay, in flight, mismatch). */
  readonly effectRuns: number;
}

/** Prepares a key in the state a path needs, and hands out the event for each call. */
interface Fixture {
  next(): PaymentEvent;
  teardown(): Promise<void>;
}

/**
 * Measures one path for every variant, interleaved call by call (see `interleave`), after `warmup` unmeasured rounds.
 * The baseline takes part in every path, doing what it always does (the work, again), so that each path's ratio is
 * taken against a baseline measured in the same rounds rather than in another phase of the run.
 */
export async function measurePath(
  path: PathName,
  all: readonly Variant[],
  options: { calls: number; warmup: number; accountId: string },
): Promise<PathResult[]> {
  const variants = variantsOn(path, all);
  const { work, cached = false } = PATHS[path];
  const callOptions = { cached };
  const tallies = new Map<Variant, Tally>();
  for (const variant of variants) {
    const fixture = await fixtureFor(path, variant, options.accountId, callOptions);
    tallies.set(variant, { fixture, latencies: [], calls: [], unexpected: {}, effectRuns: 0 });
  }
  const tallyOf = (variant: Variant) => tallies.get(variant) as Tally;
  try {
    await interleave(variants, options.warmup, async (variant) => {
      await variant.call(tallyOf(variant).fixture.next(), work, callOptions);
    });
    await interleave(variants, options.calls, async (variant) => {
      const tally = tallyOf(variant);
      const event = tally.fixture.next();
      const effectsBefore = variant.effect.calls;
      variant.meter.reset();
      variant.meter.resume();
      const started = now();
      const outcome = await variant.call(event, work, callOptions);
      const elapsed = now() - started;
      variant.meter.pause();
      tally.latencies.push(elapsed);
      tally.calls.push([...variant.meter.requests]);
      if (outcome !== expected(variant, path)) tally.unexpected[outcome] = (tally.unexpected[outcome] ?? 0) + 1;
      if (isDuplicatePath(path) && variant.idempotent) tally.effectRuns += variant.effect.calls - effectsBefore;
    });
  } finally {
    for (const tally of tallies.values()) await tally.fixture.teardown();
  }
  return variants.map((variant) => {
    const tally = tallyOf(variant);
    return {
      variant: variant.name,
      path,
      latencyMs: summarize(tally.latencies),
      samples: tally.latencies,
      calls: tally.calls,
      unexpected: tally.unexpected,
      effectRuns: tally.effectRuns,
    };
  });
}

/** One variant's measurements on the path being measured. */
interface Tally {
  readonly fixture: Fixture;
  readonly latencies: number[];
  readonly calls: MeteredRequest[][];
  readonly unexpected: Partial<Record<CallOutcome, number>>;
  effectRuns: number;
}

async function fixtureFor(path: PathName, variant: Variant, accountId: string, options: CallOptions): Promise<Fixture> {
  const key = `${path}-${randomUUID()}`;
  const idle = async () => undefined;
  if (!variant.idempotent) return { next: () => paymentEvent(accountId, key, CARD), teardown: idle };
  switch (path) {
    case 'first':
    case 'first_outside':
      return { next: () => paymentEvent(accountId, `first-${randomUUID()}`, CARD), teardown: idle };
    case 'replay':
    case 'replay_cached':
    case 'mismatch': {
      const original = await variant.call(paymentEvent(accountId, key, CARD), 'charge-and-row', options);
      if (original !== 'created') throw new Error(`${variant.name}: could not complete ${key} (${original})`);
      const body = path === 'mismatch' ? OTHER_CARD : CARD;
      return { next: () => paymentEvent(accountId, key, body), teardown: idle };
    }
    case 'in_flight': {
      const finish = await variant.holdInFlight(paymentEvent(accountId, key, CARD));
      return { next: () => paymentEvent(accountId, key, CARD), teardown: finish };
    }
  }
}
