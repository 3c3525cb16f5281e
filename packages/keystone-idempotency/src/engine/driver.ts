import type { DueOperation } from './contract.js';
import type { IdempotencyRecord, Lease, RecordStatus, StoredResponse } from './record.js';
import type { StepProgress } from './steps.js';

/**
 * What a database must provide for the engine to run the idempotency protocol on it: one read and six conditional
 * writes, in its own terms. The engine ({@link DriverStore}) holds everything else, the same for every database:
 * the rounds of a claim and of recovery's resume, the decision between rounds, the records each write carries (lease
 * tokens, downstream keys, expiries, the recovery set), the clock, the option checks, the refusal of an unstorable key
 * or an oversized response, and the recognition of a write's own earlier success.
 *
 * Every write is atomic and conditional: it changes the record (and, for a commit, writes the effects) only if its
 * condition holds when it is applied, and changes nothing at all otherwise. Two writes racing on one key are
 * serialised by the database: exactly one of them meets the condition the other's success breaks.
 *
 * A write that did not apply answers `met`, with the record its condition met, read in the same operation where the
 * database can (DynamoDB's `ALL_OLD`, PostgreSQL's `RETURNING` or the fence's detail), or right after it. The record
 * must be as stored, past its expiry or not. That is also the answer to a lost reply: a write sent again (by a client
 * retry, or by the caller) after its first sending landed meets the record it wrote itself, and the engine recognises
 * it by its lease token (no other owner ever holds the same token) and answers as if the first reply had come back.
 * So a driver never has to tell "my write landed and the reply was lost" from "someone else's write": it reports what
 * it met.
 *
 * Times are epoch ms from the engine's clock, passed in (`now`); a driver never reads a clock of its own, and never
 * lets the database's clock decide a condition. Expiries (`expiresAt`) are epoch seconds.
 *
 * `TEffect` is what a handler stages on this database: written by {@link commit} and {@link commitOneShot} in the
 * same transaction as the key's write, or not at all.
 *
 * Run the published contract suite against a store over a driver (`describeStoreContract` from
 * `keystone-idempotency/testing`): it proves each of these guarantees against the real database.
 *
 * @example
 * const store = new DriverStore(new MyDatabaseDriver(client), { leaseSeconds: 60 });
 * const outcome = await store.claim(scopedKey(scope), fingerprint(request));
 */
export interface IdempotencyDriver<TEffect> {
  /** The most effects one commit can carry in the transaction with the key's write. */
  readonly maxEffects: number;
  /** The largest response (body plus header names and values, in bytes) a record can hold. */
  readonly maxResponseBytes: number;
  /**
   * The largest progress (`StepProgress` as JSON, in bytes) a record can hold. With {@link checkpoint}; absent, the
   * engine allows 64 KiB.
   */
  readonly maxCheckpointBytes?: number;
  /**
   * What a whole record may hold of response and progress together (bytes), where the database caps one record
   * (DynamoDB's 400 KB item, less the record's own attributes): a commit after checkpoints is refused
   * (`ResponseTooLargeError`) when the two would not fit. Absent: no cap beyond each one's own.
   */
  readonly maxRecordBytes?: number;

  /**
   * Throws an `EffectKindError` for an effect this database can't write (another store's kind, or nothing a commit
   * could run). The engine calls it when a handler stages an effect, and for every effect of a commit before it
   * writes anything.
   */
  checkEffect(effect: unknown, index: number): void;

  /**
   * The record under `key` as stored, past its expiry or not, read strongly consistently: a read after a write
   * answered sees that write. Undefined when there is none. The engine decides what is live.
   */
  read(key: string): Promise<IdempotencyRecord | undefined>;

  /**
   * A fresh claim: writes `record` (in progress, attempt 1) only if no record is under its key, or the one there is
   * past its expiry at `now` (`expiresAt * 1000 <= now`) and not in the recovery set (no `recoverAt`). An unfinished
   * recoverable operation is never free, however old: freeing it would start a new generation, with a new downstream
   * key, over an effect recovery has yet to find.
   */
  putFresh(write: { readonly record: IdempotencyRecord; readonly now: number }): Promise<ClaimWriteOutcome>;

  /**
   * A takeover: replaces `previous` with `record` (in progress, a new lease token, the next attempt, the same
   * fingerprint and downstream key) only if the stored record still has `previous`'s lease token and status. Of two
   * owners taking one record over, exactly one wins. The record is written whole: `record.recoverAt` present puts it
   * in the recovery set, absent takes it out; likewise `expiresAt`.
   */
  takeOver(write: {
    readonly previous: IdempotencyRecord;
    readonly record: IdempotencyRecord;
    readonly now: number;
  }): Promise<ClaimWriteOutcome>;

  /**
   * A commit: in one transaction, completes the record (status completed, `response`, `completedAt = now`,
   * `expiresAt`, out of the recovery set) and writes `effects`, only if the record holds `lease.leaseToken` and is in
   * progress. When the condition fails nothing is written, effects included: answer `met`. When an effect fails its
   * own condition nothing is written either: throw `EffectConditionFailedError` with the effect's index. With no
   * effects a single conditional write does.
   */
  commit(write: {
    readonly lease: Lease;
    readonly response: StoredResponse;
    readonly effects: readonly TEffect[];
    readonly now: number;
    readonly expiresAt: number;
  }): Promise<WriteOutcome>;

  /**
   * A recovery point (optional: a driver without it runs every operation without steps, and the engine refuses
   * `step()` on it with a `StepUsageError` before any step runs). In one transaction, sets the record's progress to
   * `progress` and writes `effects` (the step's local writes), only if the record holds `lease.leaseToken`, is in
   * progress, and its stored progress revision is `progress.revision - 1` (a record with no progress counts as
   * revision 0). Nothing else of the record changes (its lease, expiry and recovery set stay).
   *
   * When the condition fails nothing is written, effects included: answer `met` with the record as stored. That
   * covers a lost reply: a checkpoint sent again after its first sending landed meets its own lease token and its own
   * revision, and the engine recognises it, so the effects are never written twice (the revision is what stops
   * them). A failed effect condition throws `EffectConditionFailedError` with the effect's index, as for
   * {@link commit}. With no effects a single conditional write does (a step's "started" mark, before its call).
   */
  checkpoint?(write: {
    readonly lease: Lease;
    readonly progress: StepProgress;
    readonly effects: readonly TEffect[];
    readonly now: number;
  }): Promise<WriteOutcome>;

  /**
   * A release or an abandonment: sets `status` and ends the lease (`leaseExpiresAt = now`), only if the record holds
   * `lease.leaseToken` and is in progress; the fingerprint and downstream key stay. `recoverAt` and `expiresAt` say
   * what else changes: a number sets it, `null` removes it (with `recoverAt`, the record leaves the recovery set),
   * absent leaves it as it is.
   */
  endLease(write: {
    readonly lease: Lease;
    readonly status: typeof RecordStatus.Released | typeof RecordStatus.Abandoned;
    readonly now: number;
    readonly recoverAt?: number | null;
    readonly expiresAt?: number | null;
  }): Promise<WriteOutcome>;

  /**
   * A one-shot commit: in one transaction, writes `record` (completed, with its response) and `effects`, only if the
   * key is free as for {@link putFresh} (no `previous`) or the stored record still has `previous`'s lease token and
   * status (a takeover). When the condition fails nothing is written: answer `met`. A failed effect condition throws
   * `EffectConditionFailedError`, as for {@link commit}.
   */
  commitOneShot(write: {
    readonly record: IdempotencyRecord;
    readonly previous: IdempotencyRecord | undefined;
    readonly effects: readonly TEffect[];
    readonly now: number;
  }): Promise<WriteOutcome>;

  /**
   * Recoverable operations due at `now` (`recoverAt <= now`), oldest `recoverAt` first, at most `limit`: from an index
   * of the recovery set, never a scan of every record. `leaseMs` is the store's lease, for a driver that reports
   * `firstDueAt` (`createdAt + leaseMs`, never later than `recoverAt`). An eventually consistent index is fine: the
   * engine reads each record again before it acts.
   */
  findDue(query: { readonly now: number; readonly limit: number; readonly leaseMs: number }): Promise<DueOperation[]>;
}

/**
 * What a conditional write answers: it applied, or the record its condition met (undefined when none was there, or it
 * vanished between the check and the reply). `cause`, when given, is the database's error, passed on as the cause of
 * what the engine throws (a `LeaseLostError`).
 */
export type WriteOutcome =
  | { readonly kind: 'written' }
  | { readonly kind: 'met'; readonly record: IdempotencyRecord | undefined; readonly cause?: unknown };

/**
 * What a claim's write answers: as {@link WriteOutcome}, or `held` when another session held the record past the
 * database's lock timeout (a commit under way, or one whose connection went silent); `record` is what is committed.
 * The engine never writes over a held record: a duplicate is told it is in flight. A database whose writes never
 * wait on a lock (DynamoDB) never answers it.
 */
export type ClaimWriteOutcome =
  | WriteOutcome
  | { readonly kind: 'held'; readonly record: IdempotencyRecord | undefined };
