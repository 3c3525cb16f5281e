import { randomUUID } from 'node:crypto';
import type { IdempotencyStore } from '../../engine/contract.js';
import type { Lease, StoredResponse } from '../../engine/record.js';
import { ManualClock } from '../manual-clock.js';
import type { Charge } from './outside-processor.js';
import { OutsideProcessor, StepOutsideSystem } from './outside-processor.js';

/**
 * How a call reaches the database:
 * - `direct`: as sent, as answered;
 * - `sdk-retry`: the reply to each request's first sending is lost after the database applied it, and the client
 *   sends the same request again, as the AWS SDK does after a dropped connection (and the PostgreSQL store does on a
 *   fresh connection);
 * - `reply-lost`: every reply is lost after the database applied the request, and the client gives up: the caller
 *   sees an error without knowing whether its write landed.
 */
export const Delivery = { direct: 'direct', sdkRetry: 'sdk-retry', replyLost: 'reply-lost' } as const;
export type Delivery = (typeof Delivery)[keyof typeof Delivery];

export interface ProtocolSystemOptions {
  readonly leaseSeconds: number;
  readonly ttlSeconds: number;
  /** Epoch ms. At or after the real now: DynamoDB Local's TTL sweeper deletes what is past in wall-clock time. */
  readonly startAt: number;
  readonly operations: number;
}

/**
 * A record as the database holds it, in the engine's vocabulary (times as numbers, absent fields undefined), and
 * whether it is in the recovery set as the database keeps that set (DynamoDB: the index attributes are there).
 */
export type StoredItem = Readonly<Record<string, unknown>> & { readonly inRecoveryIndex: boolean };

/** The real state after a step: the run's records (in key order) and its effect rows. */
export interface Snapshot {
  readonly items: readonly (StoredItem | undefined)[];
  readonly rows: readonly EffectRow[];
}

/** The row an owner's commit writes with the completion: the witness, in our tables, that the work was recorded. */
export interface EffectRow {
  readonly sk: string;
  readonly downstreamKey: string;
  readonly leaseToken: string;
  readonly chargeId: string;
  /**
   * How many times the row was written, where the backend's effect counts (an upsert adding one): anything but 1
   * is a transaction applied twice. Absent where the effect only overwrites.
   */
  readonly writes?: number;
}

/** What a store under test is built with in a run. */
export interface StoreSettings {
  readonly clock: ManualClock;
  readonly leaseSeconds: number;
  readonly ttlSeconds: number;
}

/**
 * One store under the protocol model: its tables, how a call's replies get lost on the way back, and how to read
 * what it holds. Made inside a `describe` (its hooks create the tables and the means of losing replies).
 */
export interface ProtocolBackend {
  /** One key per operation of a run, such that operations due at the same moment are offered in key order. */
  keys(run: string, count: number): string[];
  /** Where an operation's key sorts among operations due at the same moment (lower first). */
  dueRank(key: string): number;
  /** Runs `use` with a store whose calls are delivered as `delivery` says. */
  via<T>(
    delivery: Delivery,
    settings: StoreSettings,
    use: (store: IdempotencyStore<unknown>) => Promise<T>,
  ): Promise<T>;
  /** The records under `keys` (read strongly), in that order; undefined where there is none. */
  records(keys: readonly string[]): Promise<(StoredItem | undefined)[]>;
  effectRows(effectsPk: string): Promise<EffectRow[]>;
  /**
   * The effect that writes `row`. No condition of its own: fencing alone must keep it single. Best written as an
   * upsert that counts its writes (`EffectRow.writes`), so that one applied twice shows.
   */
  effect(effectsPk: string, row: EffectRow): unknown;
  /** What the database's own deletion of expired records does (DynamoDB's TTL, the PostgreSQL store's purge). */
  sweepExpired(keys: readonly string[], settings: StoreSettings): Promise<void>;
  cleanUp(keys: readonly string[], effectsPk: string): Promise<void>;
}

/**
 * The real system a protocol model runs against: the engine on a store with a controlled clock, the outside
 * processor, and deliveries that lose replies on demand. Each run has its own keys and effect partition, and deletes
 * what it wrote when done, so that runs sharing a table never see each other (the recovery set included).
 */
export class ProtocolSystem {
  readonly clock: ManualClock;
  readonly processor = new OutsideProcessor();
  /** The outside systems of a multi-step operation's steps, by step name: one dedupes by key, one does not. */
  readonly stepOutside: Readonly<Record<string, StepOutsideSystem>> = {
    reserve: new StepOutsideSystem('rs', true),
    ship: new StepOutsideSystem('sh', false),
  };
  readonly keys: readonly string[];
  /** The partition of the effects table this run's effect rows go to: one query reads them all. */
  readonly effectsPk: string;
  private readonly settings: StoreSettings;
  /** The state last read, until a call may have changed it: steps that only move the clock or the processor skip the reads. */
  #snapshot: Snapshot | undefined;

  constructor(
    private readonly backend: ProtocolBackend,
    options: ProtocolSystemOptions,
  ) {
    const run = randomUUID();
    this.clock = new ManualClock(options.startAt);
    this.keys = backend.keys(run, options.operations);
    this.effectsPk = `MODEL#${run}`;
    this.settings = { clock: this.clock, leaseSeconds: options.leaseSeconds, ttlSeconds: options.ttlSeconds };
  }

  /** Where an operation sorts among operations due at the same moment. */
  dueRank(opIndex: number): number {
    return this.backend.dueRank(this.keys[opIndex]!);
  }

  /** Runs `use` with a store whose requests are delivered as `delivery` says. */
  async via<T>(delivery: Delivery, use: (store: IdempotencyStore<unknown>) => Promise<T>): Promise<T> {
    this.#snapshot = undefined;
    return this.backend.via(delivery, this.settings, use);
  }

  /** The run's records and effect rows as they are now. */
  async snapshot(): Promise<Snapshot> {
    if (!this.#snapshot) {
      const [items, rows] = await Promise.all([this.records(), this.effectRows()]);
      this.#snapshot = { items, rows };
    }
    return this.#snapshot;
  }

  /** The records under the run's keys, in key order; undefined where there is none. */
  records(): Promise<(StoredItem | undefined)[]> {
    return this.backend.records(this.keys);
  }

  effectRows(): Promise<EffectRow[]> {
    return this.backend.effectRows(this.effectsPk);
  }

  /** The database's own deletion gets round to what has expired (and nothing else). */
  async sweepExpired(): Promise<void> {
    this.#snapshot = undefined;
    await this.backend.sweepExpired(this.keys, this.settings);
  }

  /** The effect an owner commits with its completion. No condition of its own: fencing alone must keep it single. */
  effectOf(opIndex: number, lease: Lease, charge: Charge): unknown {
    return this.backend.effect(this.effectsPk, {
      sk: effectRowKey(opIndex, lease.leaseToken),
      downstreamKey: lease.downstreamKey,
      leaseToken: lease.leaseToken,
      chargeId: charge.id,
    });
  }

  /**
   * The local write a step commits with its checkpoint: a row naming the operation's downstream key, the lease token
   * that wrote it and the id the step's outside system answered. No condition of its own: the checkpoint's fence and
   * revision alone must keep it single.
   */
  stepEffectOf(opIndex: number, lease: Lease, step: string, id: string): unknown {
    return this.backend.effect(this.effectsPk, {
      sk: stepRowKey(opIndex, lease.leaseToken, step),
      downstreamKey: lease.downstreamKey,
      leaseToken: lease.leaseToken,
      chargeId: id,
    });
  }

  /**
   * Reads what the store is (its limits, whether it has checkpoints) once, before the run: a routed store
   * ({@link routedStore}) answers them without a call.
   */
  async prepare(): Promise<void> {
    this.#shape = await this.via('direct', async (s) => ({
      leaseMs: s.leaseMs,
      ttlSeconds: s.ttlSeconds,
      maxEffects: s.maxEffects,
      ...(s.maxSteps !== undefined ? { maxSteps: s.maxSteps } : {}),
      ...(s.maxCheckpointBytes !== undefined ? { maxCheckpointBytes: s.maxCheckpointBytes } : {}),
    }));
    this.hasCheckpoints = await this.via('direct', async (s) => typeof s.checkpoint === 'function');
  }

  /** Whether the store has checkpoints (recovery points): without them, the model runs no multi-step operation. */
  hasCheckpoints = false;
  #shape:
    | Pick<IdempotencyStore<unknown>, 'leaseMs' | 'ttlSeconds' | 'maxEffects' | 'maxSteps' | 'maxCheckpointBytes'>
    | undefined;

  /**
   * A store whose every call goes out as `route.delivery` says at the time of the call: what an owner's handle keeps
   * across its steps, each command choosing how its own calls are delivered.
   */
  routedStore(route: { readonly delivery: string }): IdempotencyStore<unknown> {
    const shape = this.#shape;
    if (!shape) throw new Error('ProtocolSystem.prepare() was not called');
    const via = <T>(use: (store: IdempotencyStore<unknown>) => Promise<T>) => this.via(route.delivery as Delivery, use);
    return {
      ...shape,
      checkpoint: (lease, progress, effects) => via((s) => s.checkpoint!(lease, progress, effects)),
      claim: (key, fingerprint, options) => via((s) => s.claim(key, fingerprint, options)),
      commit: (lease, response, effects) => via((s) => s.commit(lease, response, effects)),
      release: (lease) => via((s) => s.release(lease)),
      abandon: (lease) => via((s) => s.abandon(lease)),
      resume: (key, options) => via((s) => s.resume(key, options)),
      findDue: (options) => via((s) => s.findDue(options)),
      get: (key) => via((s) => s.get(key)),
      claimAndCommit: (key, fingerprint, build) => via((s) => s.claimAndCommit(key, fingerprint, build)),
    };
  }

  /** Deletes the run's records and effect rows, so that no later run finds them due or in its way. */
  cleanUp(): Promise<void> {
    return this.backend.cleanUp(this.keys, this.effectsPk);
  }
}

export function effectRowKey(opIndex: number, leaseToken: string): string {
  return `op${opIndex}#${leaseToken}`;
}

/** The sort key of a step's local write; `stepOfRow` reads the step back (undefined for a commit's row). */
export function stepRowKey(opIndex: number, leaseToken: string, step: string): string {
  return `${effectRowKey(opIndex, leaseToken)}#step:${step}`;
}

export function stepOfRow(row: EffectRow): string | undefined {
  return /#step:(.+)$/.exec(row.sk)?.[1];
}

/**
 * The response an owner stores: it names the charge and the lease that committed it, so that a second commit
 * (by an owner that should have been fenced out) could never pass for a replay of the first.
 */
export function responseOf(lease: Lease, charge: Charge): StoredResponse {
  return {
    statusCode: 201,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ charge: charge.id, downstream_key: lease.downstreamKey, committed_by: lease.leaseToken }),
  };
}
