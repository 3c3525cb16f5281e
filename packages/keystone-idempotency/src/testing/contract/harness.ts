import type { Clock } from '../../engine/clock.js';
import type { IdempotencyStore } from '../../engine/contract.js';
import type { IdempotencyRecord } from '../../engine/record.js';

/** What the suite builds a store with: a clock it moves, and the lease and TTL a case needs. */
export interface ContractStoreOptions {
  readonly clock: Clock;
  readonly leaseSeconds: number;
  readonly ttlSeconds?: number;
}

/** The steps of the protocol whose reply a case can lose on the way back from the database. */
export type LostReplyStep = 'claim' | 'takeover' | 'release' | 'completion' | 'commit';

/**
 * What the suite needs of the store under test: the store, an effect that writes one row, how many rows a key has,
 * an effect whose own condition fails, and the largest response the store keeps. The rest is optional and each
 * adds the cases that need it: a count of round trips (a first claim, a replay and a commit each cost one), the
 * record as the database holds it (past its expiry too), and replies lost after the database applied the write.
 */
export interface StoreContractHarness<TEffect> {
  /** A store over the database under test, with the suite's clock, lease and TTL (pass them all on). */
  store(options: ContractStoreOptions): IdempotencyStore<TEffect>;
  /** Writes one row under `pk`, refused by its own condition if the row `pk`/`id` exists already. */
  effect(pk: string, id: string): TEffect;
  /** An effect whose own condition fails (it checks for a row that is not there): the commit must write nothing. */
  blockedEffect(): TEffect;
  /** How many rows the effects have written under `pk`: the witness for "the effect happened, once". */
  rowsUnder(pk: string): Promise<number>;
  /** The largest response (body plus headers, bytes) the store keeps; one byte more must be refused. */
  readonly maxResponseBytes: number;
  /** Round trips to the database since the last reset. Without it, the cases that count them are left out. */
  readonly roundTrips?: { reset(): void; readonly count: number };
  /**
   * The record under `key` as the database holds it, past its expiry or not, read behind the store's back. Without
   * it the suite reads through `store.get`, and leaves out the check that an expired record is still there.
   */
  stored?(key: string): Promise<IdempotencyRecord | undefined>;
  /** Stores whose replies can be lost. Without it, the cases of lost replies are left out. */
  readonly faults?: {
    /** `attempts`: how many times the store's client sends a request whose reply was lost (its own retries). */
    store(options: ContractStoreOptions & { attempts?: number }): IdempotencyStore<TEffect>;
    /** The next `times` requests of `step` on `key` are applied by the database and lose their reply. */
    loseReplies(step: LostReplyStep, key: string, times?: number): { fired(): number };
  };
}
