import type { Pool } from 'pg';
import { DriverStore } from '../engine/driver-store.js';
import { type StoreLifetimeOptions, storeTimings } from '../engine/ownership.js';
import type { DatabaseOptions } from './database.js';
import { PostgresDriver } from './driver.js';
import type { PostgresEffect } from './effect.js';
import type { TableNames, TableOptions } from './schema.js';
import * as sql from './statements.js';

export { DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS, DEFAULT_LOCK_TIMEOUT_MS } from './driver.js';

export type { PostgresEffect, PostgresStatement } from './effect.js';

export interface PostgresStoreOptions extends StoreLifetimeOptions, TableOptions, DatabaseOptions {
  /**
   * A pg `Pool`; created with `pipeline: true`, a commit with its statements is one round trip. The store listens
   * for its `error` event (a connection the server closed while idle), which would otherwise end the process.
   */
  readonly pool: Pick<Pool, 'connect'>;
  /** Largest stored response (body plus headers, bytes). Default 1 MiB. */
  readonly maxResponseBytes?: number;
  /** Most effects one commit (or one step's checkpoint) carries. Default 1000. */
  readonly maxEffects?: number;
  /** Largest progress of a multi-step operation (its steps and their results, as JSON, bytes). Default 1 MiB. */
  readonly maxCheckpointBytes?: number;
  /**
   * How long a claim, a takeover, a release or a one-shot commit waits for another session holding its key (a
   * concurrent duplicate's, a committing owner's, or one whose connection went silent mid-commit) before answering
   * in flight. Default 1000 ms: a commit holds its row for a round trip or two, so a wait that long means it is
   * stuck, and a client told 409 with `Retry-After` does better than one whose request hangs.
   */
  readonly lockTimeoutMs?: number;
  /**
   * How long one of the store's transactions may sit idle (waiting for its client's next statement) before the
   * server ends its session, releasing its row locks: set in each transaction, whatever the database's setting.
   * Default 5000 ms: its statements are written back to back, so an idle gap is a round trip or an effect
   * function's own code; five seconds of silence is a client that is gone, and ending it frees the key within a
   * short lease's reach instead of when TCP gives up.
   */
  readonly idleInTransactionTimeoutMs?: number;
}

export const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;
export const DEFAULT_MAX_EFFECTS = 1000;
export const DEFAULT_MAX_CHECKPOINT_BYTES = 1024 * 1024;

/**
 * The idempotency engine's store on PostgreSQL: the same protocol as on DynamoDB, step for step, each step a
 * statement conditioned as DynamoDB's condition expressions are.
 *
 * ```
 *  claim: INSERT ... ON CONFLICT          commit: one transaction, BEGIN ... COMMIT   ┌─ replay: the record comes
 *  DO UPDATE WHERE expired                  the fenced completion first, effects after │   back with the failed claim
 *  absent|expired ──► IN_PROGRESS ───────────────────────────────────────► COMPLETED ─┤
 *                       │   ▲     UPDATE ... WHERE lease_token = mine AND              └─ different body: mismatch
 *            release    │   │     status = IN_PROGRESS, or the fence raises and the
 *  lease_token = mine   ▼   │     transaction (its effects with it) rolls back
 *                     RELEASED ── takeover: UPDATE ... WHERE lease_token = seen AND status = seen
 * ```
 *
 * Local effects: {@link claimAndCommit} claims, runs the handler's SQL and completes in one transaction, one round
 * trip; a concurrent duplicate waits on the primary key, then replays (or, after `lockTimeoutMs`, is in flight).
 * Outside effects: {@link claim} and {@link commit} are two short transactions, fenced by the lease token; no
 * transaction is ever held open across the call to the outside system.
 *
 * Times come from the injected clock, passed as parameters; PostgreSQL's own `now()` never decides anything.
 *
 * The protocol is the engine's (`DriverStore`, the same on every store); what is PostgreSQL's here is each
 * statement's condition, the row codec and the transaction (its bounds, its effects, its lock waits).
 *
 * @example
 * const pool = new Pool({ connectionString: databaseUrl, pipeline: true });
 * await migrate(pool);
 * const store = new PostgresStore({ pool });
 * const outcome = await store.claim(scopedKey(scope), fingerprint(request));
 * if (outcome.kind === 'acquired') {
 *   const charge = await processor.charge(body, { idempotencyKey: outcome.lease.downstreamKey });
 *   await store.commit(outcome.lease, response(charge), [
 *     { text: 'INSERT INTO payments (id, amount) VALUES ($1, $2)', values: [charge.id, charge.amount] },
 *   ]);
 * }
 */
export class PostgresStore extends DriverStore<PostgresEffect> {
  readonly names: TableNames;
  private readonly postgres: PostgresDriver;

  constructor(options: PostgresStoreOptions) {
    // The lease and TTL are refused before the database's options, as they always were.
    storeTimings(options);
    const driver = new PostgresDriver(options, {
      maxEffects: options.maxEffects ?? DEFAULT_MAX_EFFECTS,
      maxResponseBytes: options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
      maxCheckpointBytes: options.maxCheckpointBytes ?? DEFAULT_MAX_CHECKPOINT_BYTES,
    });
    super(driver, options);
    this.postgres = driver;
    this.names = driver.names;
  }

  /**
   * Deletes rows past their expiry, in batches of `batchSize` (at most `maxBatches` of them), each batch its own
   * short transaction that skips rows other transactions hold: for the scheduled completer, after recovery. Reads
   * never wait for it (a row past its expiry is absent to them already); it keeps the table from growing. Returns
   * how many rows it deleted.
   */
  async purgeExpired(options: { batchSize?: number; maxBatches?: number } = {}): Promise<number> {
    const batchSize = options.batchSize ?? 1000;
    const maxBatches = options.maxBatches ?? 100;
    let deleted = 0;
    for (let batch = 0; batch < maxBatches; batch++) {
      const { rowCount } = await this.postgres.db.query(sql.purgeBatch(this.names, this.clock.now(), batchSize));
      deleted += rowCount ?? 0;
      if ((rowCount ?? 0) < batchSize) break;
    }
    return deleted;
  }
}
