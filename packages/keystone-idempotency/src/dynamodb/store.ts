import { IdempotentParameterMismatchException, TransactionConflictException } from '@aws-sdk/client-dynamodb';
import {
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  TransactWriteCommand,
  type TransactWriteCommandInput,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { type Clock, type IdSource, randomIds, systemClock } from '../engine/clock.js';
import {
  type ClaimOptions,
  type ClaimOutcome,
  type DueOperation,
  type FindDueOptions,
  type IdempotencyStore,
  MAX_CLAIM_ROUNDS,
  type OneShotContext,
  type OneShotOutcome,
  type ResumeOptions,
  type ResumeOutcome,
} from '../engine/contract.js';
import { isExpired, isOwnCompletion, leaseOf } from '../engine/decide.js';
import {
  ConfigurationError,
  ContendedError,
  EffectConditionFailedError,
  EffectKindError,
  LeaseLostError,
} from '../engine/errors.js';
import {
  assertStorable,
  type ClaimSettings,
  claimRounds,
  expiryFrom,
  freshClaimRecord,
  type OneShotStore,
  type OwnershipWrites,
  oneShotRounds,
  type RecordSource,
  resumeRounds,
  type Seen,
  type StoreLifetimeOptions,
  sleep,
  storeTimings,
  takeoverRecord,
} from '../engine/ownership.js';
import { type IdempotencyRecord, type Lease, RecordStatus, type StoredResponse } from '../engine/record.js';
import { fromItem, toItem } from './codec.js';
import { completionUpdate, endLeaseUpdate, freeCondition, takeOverUpdate, unchangedCondition } from './expressions.js';
import { RecordAttribute as A } from './layout.js';
import { dueOperations, recoveryShardOf } from './recovery-index.js';
import { conditionFailure, type TransactionFailure, transactionFailure } from './write-errors.js';

/** The SDK's TransactWriteItems action, in DocumentClient form: its four actions, each optional. */
type TransactWriteAction = NonNullable<TransactWriteCommandInput['TransactItems']>[number];
type ActionName = 'ConditionCheck' | 'Put' | 'Delete' | 'Update';
const ACTION_NAMES: readonly string[] = ['ConditionCheck', 'Put', 'Delete', 'Update'] satisfies ActionName[];

/**
 * One action of a TransactWriteItems, in DocumentClient form: the caller's own puts, updates, deletes and checks,
 * exactly one action per item, as DynamoDB requires.
 *
 * Not the SDK's own `TransactWriteItem`: that one is an intersection with an empty `Omit<...>` whose four members
 * are all optional, so TypeScript's check for "no property in common" never applies to it, and anything that is an
 * object (a PostgreSQL statement, an effect function) passes for one. This type names one action as required, so
 * SQL staged through a DynamoDB store is a compile error at the staging line.
 */
export type EffectItem = {
  [A in ActionName]: { [K in A]: NonNullable<TransactWriteAction[K]> } & { [K in Exclude<ActionName, A>]?: undefined };
}[ActionName];

export interface DynamoDbStoreOptions extends StoreLifetimeOptions {
  readonly client: DynamoDBDocumentClient;
  readonly tableName: string;
  /** Largest stored response (body plus headers, bytes). DynamoDB items are capped at 400 KB. */
  readonly maxResponseBytes?: number;
}

/** 400 KB item limit, less room for the record's own attributes. */
export const DEFAULT_MAX_RESPONSE_BYTES = 380 * 1024;
/** TransactWriteItems takes 100 actions; the key's completion is one of them. */
export const MAX_TRANSACTION_EFFECTS = 99;

const POLL_START_MS = 50;

/**
 * The idempotency engine's store on DynamoDB: claim a key, commit the work with it, or release it.
 *
 * Lifecycle of one record, and what fences each step:
 *
 * ```
 *  claim (conditional put)        commit (conditional update, or       ┌─ replay: one GetItem-free round trip
 *  absent|expired ──► IN_PROGRESS ─────────────────────────► COMPLETED ┤    (the failed put returns ALL_OLD)
 *                       │   ▲     one transaction with the effects):   └─ different body: mismatch
 *                       │   │     leaseToken = mine, status = IN_PROGRESS
 *            release    │   │ takeover (conditional update on the old leaseToken):
 *  leaseToken = mine    ▼   │ lease ran out, or released; same fingerprint, same downstreamKey
 *                     RELEASED
 * ```
 *
 * Every write that changes ownership names the lease token it expects, so an owner whose lease was taken over can
 * neither commit (its effects are in the same transaction and are not written) nor release the new owner's claim.
 *
 * @example
 * const store = new DynamoDbStore({ client, tableName: 'idempotency' });
 * const outcome = await store.claim(scopedKey(scope), fingerprint(request));
 * if (outcome.kind === 'acquired') {
 *   const charge = await processor.charge(body, { idempotencyKey: outcome.lease.downstreamKey });
 *   await store.commit(outcome.lease, response(charge), [{ Put: { TableName: 'payments', Item: row(charge) } }]);
 * }
 */
export class DynamoDbStore implements IdempotencyStore<EffectItem> {
  readonly tableName: string;
  readonly leaseMs: number;
  readonly ttlSeconds: number;
  readonly maxEffects = MAX_TRANSACTION_EFFECTS;
  private readonly client: DynamoDBDocumentClient;
  private readonly clock: Clock;
  private readonly ids: IdSource;
  private readonly maxResponseBytes: number;
  /** The writes and read the engine's claim and resume rounds drive. */
  private readonly ownership: OwnershipWrites;
  /** What the engine's rounds of claimAndCommit need of this store. */
  private readonly oneShot: OneShotStore;

  constructor(options: DynamoDbStoreOptions) {
    const { leaseMs, ttlSeconds } = storeTimings(options);
    if (!options.tableName) throw new ConfigurationError('tableName is required');
    this.client = options.client;
    this.tableName = options.tableName;
    this.leaseMs = leaseMs;
    this.ttlSeconds = ttlSeconds;
    this.clock = options.clock ?? systemClock;
    this.ids = options.ids ?? randomIds;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.ownership = {
      clock: this.clock,
      leaseMs: this.leaseMs,
      putFresh: (key, fingerprint, claim) => this.putFresh(key, fingerprint, claim),
      takeOver: (previous, now, claim) => this.takeOver(previous, now, claim),
      get: (key) => this.get(key),
    };
    this.oneShot = {
      clock: this.clock,
      ids: this.ids,
      ttlSeconds: this.ttlSeconds,
      maxResponseBytes: this.maxResponseBytes,
      get: (key) => this.get(key),
    };
  }

  /**
   * Claims `key` for a request with this fingerprint. A fresh key costs one conditional PutItem; a duplicate
   * learns the existing record from that same failed put, so a replay is one request too.
   */
  async claim(key: string, fingerprint: string, options: ClaimOptions = {}): Promise<ClaimOutcome> {
    return claimRounds(this.ownership, key, fingerprint, options);
  }

  /**
   * Refuses anything but a DynamoDB transaction item (an object with exactly one of `ConditionCheck`, `Put`,
   * `Delete`, `Update`) with an `EffectKindError`: SQL meant for a PostgreSQL store, say, staged from JavaScript or
   * through a cast. The handle calls it in `stage()`; {@link commit} and {@link claimAndCommit} call it for every
   * effect before they write anything.
   */
  checkEffect(effect: unknown, index: number): void {
    const problem = notATransactionItem(effect);
    if (problem) {
      throw new EffectKindError(
        index,
        `effect ${index} is not a DynamoDB transaction item (an object with exactly one of ConditionCheck, Put, ` +
          `Delete or Update): ${problem}. A DynamoDbStore commits transaction items; nothing was written`,
      );
    }
  }

  /**
   * Commits the work: the caller's effect items and this record's completion in one TransactWriteItems, or, with no
   * effect items (the work lives in another system, or there was none), the completion alone as one conditional
   * UpdateItem: one write unit instead of two, and one single-item write instead of a transaction.
   * The completion is conditioned on the lease token still being ours and the record still in progress, so a
   * stale owner (taken over after its lease ran out) writes nothing at all, effects included. The record leaves the
   * recovery index, and lives (and replays) for a full TTL from now, however long the operation took to finish.
   *
   * A commit whose reply was lost may be sent again, by the SDK or by the caller, even after DynamoDB has forgotten
   * the transaction's token: either way it is recognised as this owner's own completion and succeeds, rather than
   * being mistaken for a lost lease.
   *
   * @throws {LeaseLostError} this owner no longer holds the record; nothing was written.
   * @throws {EffectConditionFailedError} one of the caller's items failed its condition; nothing was written.
   * @throws {ResponseTooLargeError} the response can't be stored; nothing was written.
   */
  async commit(lease: Lease, response: StoredResponse, effects: readonly EffectItem[] = []): Promise<void> {
    this.checkEffects(effects);
    this.assertStorable(response);
    const now = this.clock.now();
    const completion = completionUpdate(this.tableName, lease, response, now, this.expiryFrom(now));
    if (effects.length === 0) return this.complete(lease, completion);
    // The lease token doubles as the transaction's ClientRequestToken, so a commit whose reply was lost can be
    // called again by the caller: the same request is answered with success, not a failed (satisfied) condition.
    try {
      await this.transact(lease.key, [...effects, { Update: completion }], lease.leaseToken);
    } catch (error) {
      if (error instanceof LeaseLostError) {
        // Sent again after DynamoDB forgot the token (10 minutes): the record's condition fails against the
        // completion our first call wrote, and the effects' against their own rows. Ours: done.
        if (isOwnCompletion(error.record, lease)) return;
        throw error;
      }
      if (!(error instanceof IdempotentParameterMismatchException)) throw error;
      // The token was used within the last 10 minutes with other parameters (a later completedAt): the first call
      // landed if the record is completed under our lease; anything else means we lost it.
      const current = await this.get(lease.key);
      if (isOwnCompletion(current, lease)) return;
      throw new LeaseLostError(lease.key, current);
    }
  }

  /**
   * Gives the key back after a transient failure, conditioned on still owning it. The lease ends now, but the
   * fingerprint and downstream key stay, so the retry reaches outside systems under the same key and a different
   * body under this key is still a mismatch. A recoverable operation becomes due for recovery one lease from now:
   * time for its client to come back first; it stays without an expiry until it is finished. Returns false (and
   * changes nothing) when this owner no longer holds it.
   */
  async release(lease: Lease): Promise<boolean> {
    const now = this.clock.now();
    return this.endLease(lease, RecordStatus.Released, {
      // The expiry goes too: a record claimed before unfinished recoverable operations lost theirs may carry one.
      ...(lease.recoverable
        ? {
            set: { [A.recoverAt]: now + this.leaseMs, [A.recoveryShard]: recoveryShardOf(lease.key) },
            remove: [A.expiresAt],
          }
        : { set: {}, remove: [] }),
      now,
    });
  }

  /**
   * Gives up on an operation (recovery found no effect under its downstream key, and its client is gone),
   * conditioned on still owning it. It leaves the recovery index but keeps its fingerprint and downstream key for a
   * full TTL from now: a late retry of the same request takes it over and reaches outside systems under the same key.
   * Returns false (and changes nothing) when this owner no longer holds it.
   */
  async abandon(lease: Lease): Promise<boolean> {
    const now = this.clock.now();
    return this.endLease(lease, RecordStatus.Abandoned, {
      set: { [A.expiresAt]: this.expiryFrom(now) },
      remove: [A.recoverAt, A.recoveryShard],
      now,
    });
  }

  /**
   * Recovery's way in: takes over an unfinished operation by its key (released, abandoned, or in progress with its
   * lease run out), keeping its fingerprint and downstream key. Unlike {@link claim} it never creates a record and
   * never disturbs a live owner: a completer or a witness of the outside effect uses it to finish an operation whose
   * client is gone. The lease it returns commits, releases or abandons like any other. An unfinished recoverable
   * operation is never past its expiry, however long it waited: recovery that falls behind still finds it.
   */
  async resume(key: string, options: ResumeOptions = {}): Promise<ResumeOutcome> {
    return resumeRounds(this.ownership, key, options);
  }

  /**
   * Recoverable operations due for recovery: in progress with their owner's lease run out, or released a lease ago
   * and not retried since. Oldest first, at most `limit`. Reads the sparse recovery index (one query per shard),
   * never the table. The index is eventually consistent: {@link resume} each key, which reads it again, before
   * acting on it.
   */
  async findDue(options: FindDueOptions = {}): Promise<DueOperation[]> {
    return dueOperations(this.client, this.tableName, this.clock.now(), options.limit ?? 100);
  }

  /**
   * For work that is entirely local (rows in DynamoDB, no outside call): claim, effect and completion in one
   * TransactWriteItems. A first request costs one round trip; a duplicate learns the stored record from the
   * cancellation reasons of that same request. `build` must be free of side effects: it may run more than once
   * and its result is discarded when the key turns out to be taken.
   */
  async claimAndCommit(
    key: string,
    fingerprint: string,
    build: (context: OneShotContext) => Promise<{ response: StoredResponse; effects: readonly EffectItem[] }>,
  ): Promise<OneShotOutcome> {
    return oneShotRounds(this.oneShot, key, fingerprint, build, async ({ record, previous, effects, now }) => {
      this.checkEffects(effects);
      const put: EffectItem = {
        Put: {
          TableName: this.tableName,
          Item: toItem(record),
          ...(previous ? unchangedCondition(previous) : freeCondition(now)),
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        },
      };
      try {
        await this.transact(key, [...effects, put], record.leaseToken);
        return { kind: 'committed' };
      } catch (error) {
        if (!(error instanceof LeaseLostError)) throw error;
        return { kind: 'met', record: error.record };
      }
    });
  }

  /**
   * The live record under `key` (strongly consistent), or undefined when absent or past its expiry. An unfinished
   * recoverable operation is never past its expiry.
   */
  async get(key: string): Promise<IdempotencyRecord | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: { [A.key]: key }, ConsistentRead: true }),
    );
    const record = Item ? fromItem(Item) : undefined;
    return record === undefined || isExpired(record, this.clock.now()) ? undefined : record;
  }

  /**
   * The completion on its own: one conditional UpdateItem. An UpdateItem has no ClientRequestToken; its condition
   * does the same job. When the reply to an update that landed is lost, the SDK's retry (or the caller's second
   * commit) fails the condition against our own completion, and the record it returns (ALL_OLD) says so: completed
   * under our lease token, which no other owner ever holds.
   */
  private async complete(lease: Lease, completion: ReturnType<typeof completionUpdate>): Promise<void> {
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      try {
        await this.client.send(new UpdateCommand(completion));
        return;
      } catch (error) {
        if (error instanceof TransactionConflictException) {
          // A transaction on the record is under way (a duplicate's claimAndCommit): nothing was written; again.
          await sleep(POLL_START_MS * (round + 1));
          continue;
        }
        const failed = conditionFailure(error);
        if (!failed) throw error;
        if (isOwnCompletion(failed.record, lease)) return;
        throw new LeaseLostError(lease.key, failed.record, { cause: error });
      }
    }
    throw new ContendedError(lease.key);
  }

  private expiryFrom(nowMs: number): number {
    return expiryFrom(nowMs, this.ttlSeconds);
  }

  private recordSource(now: number): RecordSource {
    return { now, ids: this.ids, ttlSeconds: this.ttlSeconds };
  }

  /** Claim a key nobody holds: succeeds only if the record is absent or expired. */
  private async putFresh(key: string, fingerprint: string, claim: ClaimSettings): Promise<Seen> {
    const now = this.clock.now();
    const record = freshClaimRecord(key, fingerprint, claim, this.recordSource(now));
    try {
      await this.client.send(
        new PutCommand({
          TableName: this.tableName,
          Item: toItem(record),
          ...freeCondition(now),
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { kind: 'acquired', lease: leaseOf(record, false) };
    } catch (error) {
      return this.ownWriteOr(await this.seenAfterFailedWrite(key, error), record, false);
    }
  }

  /**
   * Take over a record whose owner is gone (lease ran out) or that was released. The update names the lease token
   * we saw, so of two concurrent takeovers exactly one wins; the fingerprint and downstream key are kept, so an
   * effect the dead owner may have made elsewhere is found again under the same key, not repeated.
   */
  private async takeOver(previous: IdempotencyRecord, now: number, claim: ClaimSettings): Promise<Seen> {
    const record = takeoverRecord(previous, claim, this.recordSource(now));
    try {
      await this.client.send(new UpdateCommand(takeOverUpdate(this.tableName, previous, record)));
      return { kind: 'acquired', lease: leaseOf(record, true) };
    } catch (error) {
      return this.ownWriteOr(await this.seenAfterFailedWrite(previous.key, error), record, true);
    }
  }

  /**
   * Ends this owner's lease with a new status (released, abandoned), conditioned on still owning it in progress.
   * A lost reply that the SDK retried meets the record our first attempt wrote: same token, the new status: ours.
   */
  private async endLease(
    lease: Lease,
    status: RecordStatus,
    change: { set: Record<string, number | string>; remove: string[]; now: number },
  ): Promise<boolean> {
    try {
      await this.client.send(new UpdateCommand(endLeaseUpdate(this.tableName, lease, status, change)));
      return true;
    } catch (error) {
      const failed = conditionFailure(error);
      if (!failed) throw error;
      return failed.record?.leaseToken === lease.leaseToken && failed.record.status === status;
    }
  }

  /**
   * If the SDK retried a write whose reply was lost, the retry fails its condition against the record the first
   * attempt wrote: our own lease token. That is our claim, not someone else's in-flight request.
   */
  private ownWriteOr(seen: Seen, written: IdempotencyRecord, takeover: boolean): Seen {
    if (seen.kind === 'record' && seen.record?.leaseToken === written.leaseToken) {
      return { kind: 'acquired', lease: leaseOf(written, takeover) };
    }
    return seen;
  }

  private async seenAfterFailedWrite(key: string, error: unknown): Promise<Seen> {
    const failed = conditionFailure(error);
    // The item can be absent from the error if it vanished (TTL deletion) between the check and the reply.
    if (failed) return { kind: 'record', record: failed.record };
    if (error instanceof TransactionConflictException) {
      // A transaction on this item is under way: look again shortly.
      await sleep(POLL_START_MS);
      return { kind: 'record', record: await this.get(key) };
    }
    throw error;
  }

  /**
   * One TransactWriteItems whose last item is the record's own write. A failed record condition is a
   * {@link LeaseLostError} carrying the record met; a failed effect condition an {@link EffectConditionFailedError};
   * a conflict with another transaction is sent again (nothing was written).
   */
  private async transact(key: string, items: EffectItem[], clientRequestToken: string): Promise<void> {
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      try {
        await this.client.send(
          new TransactWriteCommand({ TransactItems: items, ClientRequestToken: clientRequestToken }),
        );
        return;
      } catch (error) {
        const failure: TransactionFailure | undefined = transactionFailure(error, items.length - 1);
        switch (failure?.kind) {
          case 'record':
            throw new LeaseLostError(key, failure.record, { cause: error });
          case 'effect':
            throw new EffectConditionFailedError(failure.index, failure.item, { cause: error });
          case 'conflict':
            await sleep(POLL_START_MS * (round + 1));
            continue;
          case undefined:
            throw error;
        }
      }
    }
    throw new ContendedError(key);
  }

  /** Every effect of a commit, checked before anything is written. */
  private checkEffects(effects: readonly unknown[]): void {
    for (const [index, effect] of effects.entries()) this.checkEffect(effect, index);
  }

  private assertStorable(response: StoredResponse): void {
    assertStorable(response, this.maxResponseBytes);
  }
}

/**
 * Why `effect` is not a transaction item DynamoDB would take, in a few words; undefined when it is one. Names the
 * likely mistake: SQL (a PostgreSQL store's statement, or its effect function) where a DynamoDB item was meant.
 */
function notATransactionItem(effect: unknown): string | undefined {
  if (typeof effect === 'function') return 'it is a function (an effect function of a PostgreSQL store?)';
  if (effect === null || typeof effect !== 'object' || Array.isArray(effect)) {
    return `it is ${effect === null ? 'null' : Array.isArray(effect) ? 'an array' : typeof effect}`;
  }
  const present = Object.entries(effect).filter(([, value]) => value !== undefined);
  const actions = present.filter(([name]) => ACTION_NAMES.includes(name));
  const others = present.filter(([name]) => !ACTION_NAMES.includes(name)).map(([name]) => name);
  if ('text' in effect && typeof (effect as { text: unknown }).text === 'string') {
    return 'it has `text` (a SQL statement, for a PostgreSQL store?)';
  }
  if (actions.length !== 1) {
    return actions.length === 0 ? 'it has none of them' : `it has ${actions.map(([name]) => name).join(' and ')}`;
  }
  if (others.length > 0) return `it also has ${others.join(', ')}`;
  const [name, action] = actions[0] as [string, unknown];
  if (action === null || typeof action !== 'object') return `its ${name} is not an object`;
  return undefined;
}
