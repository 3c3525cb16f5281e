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
  readonly expiresAt: number;
  /** The key forwarded to outside systems for this generation of the record (same across owners and retries). */
  readonly downstreamKey: string;
  /** How many owners have held this record (1 for the first, +1 for each takeover). */
  readonly attempt: number;
  readonly createdAt: number;
  readonly response?: StoredResponse;
}

/** What an owner holds after a successful claim: enough to commit or release, and nothing else. */
export interface Lease {
  readonly key: string;
  readonly leaseToken: string;
  readonly leaseExpiresAt: number;
  readonly downstreamKey: string;
  readonly fingerprint: string;
  readonly attempt: number;
  /** True when this lease took over a released record or one whose owner's lease ran out. */
  readonly takeover: boolean;
}
