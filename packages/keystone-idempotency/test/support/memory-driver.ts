import {
  type ClaimWriteOutcome,
  type DueOperation,
  EffectConditionFailedError,
  EffectKindError,
  type IdempotencyDriver,
  type IdempotencyRecord,
  RecordStatus,
  type WriteOutcome,
} from 'keystone-idempotency/engine';

/**
 * A third store, written as a team outside the package would write one: a driver over a database held in memory,
 * imported from the package's published entry points only. Each write checks its condition and applies with no
 * `await` in between, so it is atomic as a database's conditional write is. It proves the driver interface is all a
 * store needs: the published contract suite runs against `new DriverStore(new MemoryDriver())` as against DynamoDB
 * and PostgreSQL.
 */

/** What a handler stages here: a row inserted under `pk` (refused if `id` is there already), or a row required. */
export type MemoryEffect =
  | { readonly insert: { readonly pk: string; readonly id: string; readonly ifAbsent?: boolean } }
  | { readonly require: { readonly pk: string } };

export class MemoryDriver implements IdempotencyDriver<MemoryEffect> {
  readonly maxEffects = 100;
  readonly maxResponseBytes = 64 * 1024;
  /** The records as stored, past their expiry or not. */
  readonly records = new Map<string, IdempotencyRecord>();
  /** The effects' rows: ids under each `pk`. */
  readonly rows = new Map<string, Set<string>>();
  /** Calls made, as round trips to a database would be counted. */
  calls = 0;

  checkEffect(effect: unknown, index: number): void {
    const candidate = effect as Partial<{ insert: unknown; require: unknown }> | null;
    if (typeof candidate !== 'object' || candidate === null || (!candidate.insert && !candidate.require)) {
      throw new EffectKindError(index, `effect ${index} is not a memory effect ({ insert } or { require })`);
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
    const { lease, response, expiresAt } = write;
    return this.transact(
      lease.key,
      (current) => current?.leaseToken === lease.leaseToken && current.status === RecordStatus.InProgress,
      (current) => {
        const { recoverAt: _leavesTheRecoverySet, ...kept } = current as IdempotencyRecord;
        return { ...kept, status: RecordStatus.Completed, response, expiresAt };
      },
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
      (current) =>
        current?.leaseToken === lease.leaseToken &&
        current.status === RecordStatus.InProgress &&
        (current.progress?.revision ?? 0) === progress.revision - 1,
      (current) => ({ ...(current as IdempotencyRecord), progress }),
      write.effects,
    );
  }

  async endLease(write: Parameters<IdempotencyDriver<MemoryEffect>['endLease']>[0]): Promise<WriteOutcome> {
    const { lease, status, now, recoverAt, expiresAt } = write;
    return this.transact(
      lease.key,
      (current) => current?.leaseToken === lease.leaseToken && current.status === RecordStatus.InProgress,
      (current) => {
        const next: Record<string, unknown> = { ...current, status, leaseExpiresAt: now };
        if (recoverAt === null) delete next.recoverAt;
        else if (recoverAt !== undefined) next.recoverAt = recoverAt;
        if (expiresAt === null) delete next.expiresAt;
        else if (expiresAt !== undefined) next.expiresAt = expiresAt;
        return next as unknown as IdempotencyRecord;
      },
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
    return [...this.records.values()]
      .filter((record) => record.recoverAt !== undefined && record.recoverAt <= now)
      .sort((a, b) => (a.recoverAt ?? 0) - (b.recoverAt ?? 0))
      .slice(0, limit)
      .map((record) => ({ key: record.key, recoverAt: record.recoverAt ?? 0 }));
  }

  /**
   * One atomic write: the record's condition, then every effect's, then all of it applied, or nothing. No `await`
   * between the checks and the writes, so no other call runs in between.
   */
  private transact(
    key: string,
    condition: (current: IdempotencyRecord | undefined) => boolean,
    next: (current: IdempotencyRecord | undefined) => IdempotencyRecord,
    effects: readonly MemoryEffect[],
  ): WriteOutcome {
    this.calls++;
    const current = this.records.get(key);
    if (!condition(current)) return { kind: 'met', record: current };
    for (const [index, effect] of effects.entries()) {
      const refused =
        'insert' in effect
          ? effect.insert.ifAbsent !== false && this.rows.get(effect.insert.pk)?.has(effect.insert.id) === true
          : (this.rows.get(effect.require.pk)?.size ?? 0) === 0;
      if (refused) throw new EffectConditionFailedError(index, { ...effect });
    }
    this.records.set(key, next(current));
    for (const effect of effects) {
      if (!('insert' in effect)) continue;
      const ids = this.rows.get(effect.insert.pk) ?? new Set<string>();
      ids.add(effect.insert.id);
      this.rows.set(effect.insert.pk, ids);
    }
    return { kind: 'written' };
  }
}

/** No record, or one past its expiry that is not an unfinished recoverable operation. */
function isFree(current: IdempotencyRecord | undefined, now: number): boolean {
  if (current === undefined) return true;
  return current.recoverAt === undefined && current.expiresAt !== undefined && current.expiresAt * 1000 <= now;
}

/** The record is still exactly as seen: the same lease token, the same status. */
function isAsSeen(current: IdempotencyRecord | undefined, seen: IdempotencyRecord): boolean {
  return current?.leaseToken === seen.leaseToken && current.status === seen.status;
}
