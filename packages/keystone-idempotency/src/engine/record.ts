import type { StepProgress } from './steps.js';

/** Where a record stands. `as const` object rather than an enum: the values are what is stored. */
export const RecordStatus = {
  /** Claimed: one owner holds the lease and is doing the work. */
  InProgress: 'IN_PROGRESS',
  /** The work committed together with this record; its response replays. */
  Completed: 'COMPLETED',
  /**
   * Given back after a transient failure. The lease ended, but the fingerprint and downstream key stay: the next
   * attempt takes the record over and reaches any outside system under the same key.
   */
  Released: 'RELEASED',
  /**
   * Given up on by recovery: nobody completed it and the outside system holds no effect under its downstream key.
   * Like a released record it keeps its fingerprint and downstream key until it expires, so a late retry of the
   * same request takes it over and reaches the outside system under the same key (finding anything made since).
   */
  Abandoned: 'ABANDONED',
} as const;
export type RecordStatus = (typeof RecordStatus)[keyof typeof RecordStatus];

/** A response worth replaying: the status, the body byte for byte, and the headers that matter. */
export interface StoredResponse {
  readonly statusCode: number;
  readonly body: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly isBase64Encoded?: boolean;
}

/** One idempotency record, as stored. Times: `leaseExpiresAt` and `createdAt` in ms, `expiresAt` in s (TTL). */
export interface IdempotencyRecord {
  readonly key: string;
  readonly status: RecordStatus;
  readonly fingerprint: string;
  readonly leaseToken: string;
  readonly leaseExpiresAt: number;
  /**
   * After this (epoch seconds) the record is absent to every read, and the database may delete it. Absent while the
   * operation is in the recovery set (`recoverAt` set): an unfinished recoverable operation never expires, since
   * forgetting it would let a late retry charge again under a new downstream key. Commit and abandon give it a full
   * TTL from then. (A DynamoDB record written before this rule may carry both; `recoverAt` wins: see `isExpired`.)
   */
  readonly expiresAt?: number;
  /** The key forwarded to outside systems for this generation of the record (same across owners and retries). */
  readonly downstreamKey: string;
  /** How many owners have held this record (1 for the first, +1 for each takeover). */
  readonly attempt: number;
  readonly createdAt: number;
  readonly response?: StoredResponse;
  /**
   * Present only while a recoverable operation is unfinished (in progress or released): epoch ms after which
   * recovery may take it over. Together with its shard it forms the sparse recovery index. While it is present the
   * record has no expiry.
   */
  readonly recoverAt?: number;
  /**
   * How far a multi-step operation got (its recovery points: `IdempotencyHandle.step`): absent until its first
   * checkpoint. Kept by takeovers, releases, abandonment and the commit, so a new attempt resumes after the last step
   * done; a fresh claim (a new generation, new downstream keys) starts without.
   */
  readonly progress?: StepProgress;
}

/** What an owner holds after a successful claim: enough to commit or release, and nothing else. */
export interface Lease {
  readonly key: string;
  readonly leaseToken: string;
  readonly leaseExpiresAt: number;
  readonly downstreamKey: string;
  readonly fingerprint: string;
  readonly attempt: number;
  /** When the operation was first claimed (epoch ms): the record's `createdAt`, the same for every owner. */
  readonly createdAt: number;
  /** True when this lease took over a released record or one whose owner's lease ran out. */
  readonly takeover: boolean;
  /**
   * True when the operation is tracked in the recovery index until it completes or is abandoned: its effect lives
   * in another system, so a crashed or abandoned attempt must be finished (or given up) without its client.
   */
  readonly recoverable: boolean;
  /** The operation's progress when this lease was taken (`IdempotencyRecord.progress`): the steps already done. */
  readonly progress?: StepProgress;
}
