import { IdempotencyError } from './errors.js';
import { type IdempotencyRecord, type Lease, RecordStatus, type StoredResponse } from './record.js';

/**
 * What to do about a request, given the record found under its key. Pure: the same inputs, the same answer.
 *
 * - `fresh`: no live record (absent, or past its expiry: TTL deletion lags, so expiry is checked here). An
 *   unfinished recoverable operation is never past its expiry: it is taken over, under its downstream key.
 * - `mismatch`: a live record made from a different request: the client reused its key for another operation.
 * - `replay`: the work committed; return the stored response.
 * - `in_flight`: another owner holds a live lease; come back after `retryAfterMs` (a hint: most originals finish
 *   long before their lease), and at the latest after `leaseRemainingMs`, when the owner has finished or is gone.
 * - `takeover`: the record was released or abandoned, or its owner's lease ran out; claim it by its current lease
 *   token (same fingerprint, same downstream key).
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export type Decision =
  | { readonly kind: 'fresh' }
  | { readonly kind: 'mismatch'; readonly record: IdempotencyRecord }
  | { readonly kind: 'replay'; readonly response: StoredResponse; readonly record: IdempotencyRecord }
  | {
      readonly kind: 'in_flight';
      readonly retryAfterMs: number;
      readonly leaseRemainingMs: number;
      readonly record: IdempotencyRecord;
    }
  | { readonly kind: 'takeover'; readonly record: IdempotencyRecord };

/**
 * The record is past its expiry, and so absent to every read (TTL deletion lags, so every store checks it). Never
 * true of an unfinished recoverable operation (one in the recovery set): it lives until recovery, or its client,
 * finishes it, however long that takes. Only finished records (completed, abandoned) and ones claimed without
 * recovery expire.
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export function isExpired(record: Pick<IdempotencyRecord, 'expiresAt' | 'recoverAt'>, nowMs: number): boolean {
  if (record.recoverAt !== undefined || record.expiresAt === undefined) return false;
  return record.expiresAt * 1000 <= nowMs;
}

/**
 * Most originals finish well within a second; telling a client to wait out the whole lease (sized for a crash)
 * would stall every double tap. Suggest a short delay, never longer than the lease has left.
 */
const SUGGESTED_RETRY_AFTER_MS = 1000;

/** @internal the package's own stores and adapters use it; not exported by the package */
export function decide(record: IdempotencyRecord | undefined, fingerprint: string, nowMs: number): Decision {
  if (record === undefined || isExpired(record, nowMs)) return { kind: 'fresh' };
  if (record.fingerprint !== fingerprint) return { kind: 'mismatch', record };
  switch (record.status) {
    case RecordStatus.Completed:
      // Completion is written with its response in one update; a completed record without one is corrupt. Re-running
      // the work could repeat an effect, so refuse loudly instead.
      if (record.response === undefined) throw new IdempotencyError(`completed record ${record.key} has no response`);
      return { kind: 'replay', response: record.response, record };
    case RecordStatus.Released:
    case RecordStatus.Abandoned:
      return { kind: 'takeover', record };
    case RecordStatus.InProgress: {
      const remaining = record.leaseExpiresAt - nowMs;
      if (remaining <= 0) return { kind: 'takeover', record };
      return {
        kind: 'in_flight',
        retryAfterMs: Math.min(remaining, SUGGESTED_RETRY_AFTER_MS),
        leaseRemainingMs: remaining,
        record,
      };
    }
  }
}

/**
 * The lease an owner holds on the record it just wrote (a fresh claim, or a takeover when `takeover`).
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export function leaseOf(record: IdempotencyRecord, takeover: boolean): Lease {
  return {
    key: record.key,
    leaseToken: record.leaseToken,
    leaseExpiresAt: record.leaseExpiresAt,
    downstreamKey: record.downstreamKey,
    fingerprint: record.fingerprint,
    attempt: record.attempt,
    createdAt: record.createdAt,
    takeover,
    recoverable: record.recoverAt !== undefined,
    ...(record.progress ? { progress: record.progress } : {}),
  };
}

/**
 * The record is completed under this lease: this owner's own commit landed (its reply may have been lost). No other
 * owner ever holds the same lease token, so a commit sent again recognises its own success by it.
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export function isOwnCompletion(record: IdempotencyRecord | undefined, lease: Pick<Lease, 'leaseToken'>): boolean {
  return record?.status === RecordStatus.Completed && record.leaseToken === lease.leaseToken;
}
