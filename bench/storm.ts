import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { median, now, pool } from './measure';
import { CARD, paymentEvent } from './payment-flow';
import type { CallOutcome, Variant, VariantName } from './variants';

export interface StormOptions {
  readonly calls: number;
  readonly keys: number;
  readonly concurrency: number;
}

export const DEFAULT_STORM: StormOptions = { calls: 1000, keys: 100, concurrency: 50 };

/** One storm against one variant. */
export interface StormRun {
  readonly variant: VariantName;
  readonly round: number;
  readonly wallMs: number;
  /** Payment rows written: the effect as the database sees it. */
  readonly rows: number;
  /** Calls into the processor stand-in (none for the purely local variant). */
  readonly effectCalls: number;
  readonly outcomes: Readonly<Partial<Record<CallOutcome, number>>>;
  readonly dynamoDbRequests: number;
  /**
   * For an idempotent variant, one row per key, and one processor call per key when it calls one. Undefined for the
   * baseline, which is expected to write one per call.
   */
  readonly correct: boolean | undefined;
}

/**
 * A duplicate storm: `calls` calls over `keys` keys, `concurrency` in flight at once. The calls for one key are
 * consecutive (key 0 ten times, then key 1 ten times, ...), so with 50 in flight about five keys are each hit by ten
 * concurrent duplicates: the double-tap at its worst, not duplicates spread out in time.
 */
export async function runStorm(
  variant: Variant,
  options: StormOptions & { round: number; accountId: string },
): Promise<StormRun> {
  const perKey = Math.ceil(options.calls / options.keys);
  const events = Array.from({ length: options.calls }, (_, index) =>
    paymentEvent(options.accountId, `storm-${Math.floor(index / perKey)}`, CARD),
  );
  const outcomes: Partial<Record<CallOutcome, number>> = {};
  const effectsBefore = variant.effect.calls;
  variant.meter.reset();
  variant.meter.resume();
  const started = now();
  await pool(events.length, options.concurrency, async (index) => {
    const outcome = await variant.call(events[index] as (typeof events)[number]);
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
  });
  const wallMs = now() - started;
  variant.meter.pause();
  const dynamoDbRequests = variant.meter.requests.length;
  variant.meter.reset();
  const rows = await countPayments(variant, options.accountId);
  const effectCalls = variant.effect.calls - effectsBefore;
  return {
    variant: variant.name,
    round: options.round,
    wallMs,
    rows,
    effectCalls,
    outcomes,
    dynamoDbRequests,
    correct: variant.idempotent
      ? rows === options.keys && (!variant.externalEffect || effectCalls === options.keys)
      : undefined,
  };
}

/** Payment rows of one account (partition `ACCOUNT#<id>`), counted by a strongly consistent query. */
export async function countPayments(variant: Variant, accountId: string): Promise<number> {
  let count = 0;
  let startKey: Record<string, unknown> | undefined;
  do {
    const page = await variant.documentClient.send(
      new QueryCommand({
        TableName: variant.paymentsTable,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': `ACCOUNT#${accountId}` },
        Select: 'COUNT',
        ConsistentRead: true,
        ...(startKey ? { ExclusiveStartKey: startKey } : {}),
      }),
    );
    count += page.Count ?? 0;
    startKey = page.LastEvaluatedKey;
  } while (startKey);
  return count;
}

/** All rounds of one variant's storm. */
export interface StormSummary {
  readonly variant: VariantName;
  readonly externalEffect: boolean;
  readonly medianWallMs: number;
  readonly wallMs: readonly number[];
  readonly rows: readonly number[];
  readonly effectCalls: readonly number[];
  /** Summed over rounds. */
  readonly outcomes: Readonly<Partial<Record<CallOutcome, number>>>;
  readonly dynamoDbRequestsPerRound: number;
  /** Every round correct (always true for the baseline, which asserts nothing). */
  readonly allCorrect: boolean;
  /** The first errors behind `error` outcomes, if any. */
  readonly errors: readonly string[];
}

export function summarizeStorms(runs: readonly StormRun[], variants: readonly Variant[]): StormSummary[] {
  return variants.map((variant) => {
    const mine = runs.filter((run) => run.variant === variant.name);
    const outcomes: Partial<Record<CallOutcome, number>> = {};
    for (const run of mine) {
      for (const [kind, count] of Object.entries(run.outcomes) as [CallOutcome, number][]) {
        outcomes[kind] = (outcomes[kind] ?? 0) + count;
      }
    }
    const wallMs = mine.map((run) => run.wallMs);
    return {
      variant: variant.name,
      externalEffect: variant.externalEffect,
      medianWallMs: median(wallMs),
      wallMs,
      rows: mine.map((run) => run.rows),
      effectCalls: mine.map((run) => run.effectCalls),
      outcomes,
      dynamoDbRequestsPerRound: mine.reduce((sum, run) => sum + run.dynamoDbRequests, 0) / Math.max(mine.length, 1),
      allCorrect: mine.every((run) => run.correct !== false),
      errors: variant.errors,
    };
  });
}
