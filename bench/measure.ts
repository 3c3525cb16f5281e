/** Latency statistics, in milliseconds. */
export interface LatencySummary {
  readonly count: number;
  readonly p50: number;
  readonly p99: number;
  readonly mean: number;
  readonly min: number;
  readonly max: number;
}

/** Nearest-rank percentile of an ascending array: the smallest sample with at least p% of samples at or below it. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] as number;
}

export function summarize(samples: readonly number[]): LatencySummary {
  const sorted = [...samples].sort((a, b) => a - b);
  const sum = sorted.reduce((total, value) => total + value, 0);
  return {
    count: sorted.length,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    mean: sorted.length ? sum / sorted.length : Number.NaN,
    min: sorted[0] ?? Number.NaN,
    max: sorted.at(-1) ?? Number.NaN,
  };
}

export function median(values: readonly number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
}

/**
 * Runs `rounds` rounds; in each, every participant runs once, one after the other: A B C D, B C D A, C D A B, ...
 * Interleaving spreads a noisy moment (a GC pause in the JVM, another process waking up) over all participants
 * instead of landing on whichever one happened to run then; rotating the order keeps any participant from always
 * following the same neighbour.
 */
export async function interleave<T>(
  participants: readonly T[],
  rounds: number,
  run: (participant: T, round: number) => Promise<void>,
): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    for (let offset = 0; offset < participants.length; offset++) {
      await run(participants[(round + offset) % participants.length] as T, round);
    }
  }
}

/** Runs `tasks` with at most `concurrency` of them in flight at once, in order of their index. */
export async function pool(count: number, concurrency: number, task: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

/** Milliseconds since an arbitrary origin, monotonic and sub-millisecond. */
export function now(): number {
  return performance.now();
}

/**
 * A 95% bootstrap interval for p50(numerator) / p50(denominator): both sample sets resampled with replacement,
 * `resamples` times, with a fixed seed so that one run always reports the same interval. It tells a real difference
 * from noise: a ratio of 1.03 whose interval spans 0.98 to 1.08 is not a measured slowdown.
 */
export function medianRatioInterval(
  numerator: readonly number[],
  denominator: readonly number[],
  resamples = 1000,
): { readonly low: number; readonly high: number } {
  const random = mulberry32(0x5eed);
  const top = [...numerator].sort((a, b) => a - b);
  const bottom = [...denominator].sort((a, b) => a - b);
  const ratios: number[] = [];
  for (let i = 0; i < resamples; i++) ratios.push(resampledMedian(top, random) / resampledMedian(bottom, random));
  ratios.sort((a, b) => a - b);
  return { low: percentile(ratios, 2.5), high: percentile(ratios, 97.5) };
}

/** The median of a resample (with replacement) of a sorted array, by counting drawn indices: O(n), no sort. */
function resampledMedian(sorted: readonly number[], random: () => number): number {
  const counts = new Uint32Array(sorted.length);
  for (let i = 0; i < sorted.length; i++) {
    const drawn = Math.floor(random() * sorted.length);
    counts[drawn] = (counts[drawn] as number) + 1;
  }
  const rank = Math.ceil(sorted.length / 2);
  let seen = 0;
  for (let index = 0; index < counts.length; index++) {
    seen += counts[index] as number;
    if (seen >= rank) return sorted[index] as number;
  }
  return sorted.at(-1) as number;
}

function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
