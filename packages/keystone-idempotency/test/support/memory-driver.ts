import {
  type ClaimWriteOutcome,
  type DueOperation,
  EffectConditionFailedError,
  EffectKindError,
  type IdempotencyDriver,
  type IdempotencyRecord,
  RecordStatus,
  type StoredResponse,
  type WriteOutcome,
} from 'keystone-idempotency/engine';

/**
 * A third store, written as a team outside the package would write one: a driver over a database held in memory,
 * imported from the package's published entry points only. Each write checks its condition and applies with no
 * `await` in between, so it is atomic as a database's conditional write is. It proves the driver interface is all a
 * store needs: the published contract suite runs against `new DriverStore(new MemoryDriver())` as against DynamoDB
 * and PostgreSQL.
 */

/**
 * What a handler stages here: a row inserted under `pk` (refused if `id` is there already), a row required, or an
 * item written under `pk`/`sk` whatever is there (its writes counted: one applied twice shows).
 */
export type MemoryEffect =
  | { readonly insert: { readonly pk: string; readonly id: string; readonly ifAbsent?: boolean } }
  | { readonly require: { readonly pk: string } }
  | {
      readonly upsert: { readonly pk: string; readonly sk: string; readonly values: Readonly<Record<string, string>> };
    };

/** An item an `upsert` wrote: its values, and how many times it was written. */
export interface MemoryItem {
  readonly values: Readonly<Record<string, string>>;
  readonly writes: number;
}

export class MemoryDriver implements IdempotencyDriver<MemoryEffect> {
  readonly maxEffects = 100;
  readonly maxResponseBytes = 64 * 1024;
  /** The records as stored, past their expiry or not. */
  readonly records = new Map<string, IdempotencyRecord>();
  /** The effects' rows: ids under each `pk`. */
  readonly rows = new Map<string, Set<string>>();
  /** The effects' items: under each `pk`, by `sk`. */
  readonly items = new Map<string, Map<string, MemoryItem>>();
  /** Calls made, as round trips to a database would be counted. */
  calls = 0;

  checkEffect(effect: unknown, index: number): void {
    const candidate = effect as Partial<{ insert: unknown; require: unknown; upsert: unknown }> | null;
    if (typeof candidate !== 'object' || candidate === null) {
      throw new EffectKindError(index, `effect ${index} is not a memory effect: not an object`);
    }
    if (!candidate.insert && !candidate.require && !candidate.upsert) {
      throw new EffectKindError(
        index,
        `effect ${index} is not a memory effect ({ insert }, { require } or { upsert })`,
      );
    }
  }

  async read(key: string): Promise<IdempotencyRecord | undefined> {
    this.calls++;
    return this.records.get(key);
  }

  async putFresh({ record, now }: { record: IdempotencyRecord; now: number }): Promise<ClaimWriteOutcome> {
    return this.transact(
      record.key,
      (current) => isFree(current, now),
      () => record,
      [],
    );
  }

  async takeOver({ previous, record }: { previous: IdempotencyRecord; record: IdempotencyRecord }) {
    return this.transact(
      previous.key,
      (current) => isAsSeen(current, previous),
      () => record,
      [],
    );
  }

  async commit(write: Parameters<IdempotencyDriver<MemoryEffect>['commit']>[0]): Promise<WriteOutcome> {
    return this.transact(
      write.lease.key,
      (current) => holds(current, write.lease),
      (current) => completed(current as IdempotencyRecord, write),
      write.effects,
    );
  }

  /** A recovery point: the progress, if this lease holds the record in progress at the revision it follows. */
  async checkpoint(
    write: Parameters<NonNullable<IdempotencyDriver<MemoryEffect>['checkpoint']>>[0],
  ): Promise<WriteOutcome> {
    const { lease, progress } = write;
    return this.transact(
      lease.key,
      (current) => holds(current, lease) && (current?.progress?.revision ?? 0) === progress.revision - 1,
      (current) => ({ ...(current as IdempotencyRecord), progress }),
      write.effects,
    );
  }

  async endLease(write: Parameters<IdempotencyDriver<MemoryEffect>['endLease']>[0]): Promise<WriteOutcome> {
    return this.transact(
      write.lease.key,
      (current) => holds(current, write.lease),
      (current) => leaseEnded(current as IdempotencyRecord, write),
      [],
    );
  }

  async commitOneShot(write: Parameters<IdempotencyDriver<MemoryEffect>['commitOneShot']>[0]): Promise<WriteOutcome> {
    const { record, previous, now } = write;
    return this.transact(
      record.key,
      (current) => (previous ? isAsSeen(current, previous) : isFree(current, now)),
      () => record,
      write.effects,
    );
  }

  async findDue({ now, limit }: { now: number; limit: number }): Promise<DueOperation[]> {
    this.calls++;
    return (
      [...this.records.values()]
        .filter((record) => record.recoverAt !== undefined && record.recoverAt <= now)
        // Oldest first; operations due at the same moment in key order.
        .sort((a, b) => (a.recoverAt ?? 0) - (b.recoverAt ?? 0) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
        .slice(0, limit)
        .map((record) => ({ key: record.key, recoverAt: record.recoverAt ?? 0 }))
    );
  }

  /**
   * One atomic write: the record's condition, then every effect's, then all of it applied, or nothing. No `await`
   * between the checks and the writes, so no other call runs in between. Protected so that the broken drivers the
   * suites' own test keeps (broken-drivers.ts) can each drop one guarantee of a write and keep the rest.
   */
  protected transact(
    key: string,
    condition: (current: IdempotencyRecord | undefined) => boolean,
    next: (current: IdempotencyRecord | undefined) => IdempotencyRecord,
    effects: readonly MemoryEffect[],
  ): WriteOutcome {
    this.calls++;
    const current = this.records.get(key);
    if (!condition(current)) return { kind: 'met', record: current };
    for (const [index, effect] of effects.entries()) {
      if (this.refuses(effect)) throw new EffectConditionFailedError(index, { ...effect });
    }
    this.records.set(key, next(current));
    this.apply(effects);
    return { kind: 'written' };
  }

  /** Whether an effect's own condition fails: a row inserted where its id is, or a row required where none is. */
  private refuses(effect: MemoryEffect): boolean {
    if ('insert' in effect) {
      return effect.insert.ifAbsent !== false && this.rows.get(effect.insert.pk)?.has(effect.insert.id) === true;
    }
    if ('require' in effect) return (this.rows.get(effect.require.pk)?.size ?? 0) === 0;
    return false;
  }

  /** Writes the effects, their conditions already checked. */
  protected apply(effects: readonly MemoryEffect[]): void {
    for (const effect of effects) {
      if ('insert' in effect) {
        const ids = this.rows.get(effect.insert.pk) ?? new Set<string>();
        ids.add(effect.insert.id);
        this.rows.set(effect.insert.pk, ids);
      } else if ('upsert' in effect) {
        const { pk, sk, values } = effect.upsert;
        const items = this.items.get(pk) ?? new Map<string, MemoryItem>();
        const before = items.get(sk);
        items.set(sk, { values: { ...before?.values, ...values }, writes: (before?.writes ?? 0) + 1 });
        this.items.set(pk, items);
      }
    }
  }
}

/** No record, or one past its expiry that is not an unfinished recoverable operation. */
export function isFree(current: IdempotencyRecord | undefined, now: number): boolean {
  if (current === undefined) return true;
  return current.recoverAt === undefined && current.expiresAt !== undefined && current.expiresAt * 1000 <= now;
}

/** The record is still exactly as seen: the same lease token, the same status. */
export function isAsSeen(current: IdempotencyRecord | undefined, seen: IdempotencyRecord): boolean {
  return current?.leaseToken === seen.leaseToken && current.status === seen.status;
}

/** The record holds this lease in progress: what a commit, a checkpoint and the end of a lease are fenced by. */
export function holds(current: IdempotencyRecord | undefined, lease: { readonly leaseToken: string }): boolean {
  return current?.leaseToken === lease.leaseToken && current.status === RecordStatus.InProgress;
}

/** The record a commit leaves: completed, with its response and a full TTL, out of the recovery set. */
export function completed(
  current: IdempotencyRecord,
  { response, expiresAt }: { readonly response: StoredResponse; readonly expiresAt: number },
): IdempotencyRecord {
  const { recoverAt: _leavesTheRecoverySet, ...kept } = current;
  return { ...kept, status: RecordStatus.Completed, response, expiresAt };
}

/**
 * The record a release or an abandonment leaves: its new status, the lease ended at `now`; `recoverAt` and
 * `expiresAt` set by a number, removed by null, left as they are when absent.
 */
export function leaseEnded(
  current: IdempotencyRecord,
  write: Parameters<IdempotencyDriver<MemoryEffect>['endLease']>[0],
): IdempotencyRecord {
  const { status, now, recoverAt, expiresAt } = write;
  const next: Record<string, unknown> = { ...current, status, leaseExpiresAt: now };
  if (recoverAt === null) delete next.recoverAt;
  else if (recoverAt !== undefined) next.recoverAt = recoverAt;
  if (expiresAt === null) delete next.expiresAt;
  else if (expiresAt !== undefined) next.expiresAt = expiresAt;
  return next as unknown as IdempotencyRecord;
}
