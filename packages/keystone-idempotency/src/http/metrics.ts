/**
 * The outcome counters the HTTP idempotency middleware emits, one per outcome of a request, under these names
 * (`Count`). The reference service's dashboards and alarms are built from this list.
 */
export const IdempotencyMetric = {
  /** A fresh key was claimed and the handler ran. */
  claimed: 'IdempotencyClaimed',
  /** A released, abandoned or run-out operation was taken over and the handler ran again (same downstream key). */
  takeover: 'IdempotencyTakeover',
  /** A completed operation's response was replayed; the handler did not run. */
  replayed: 'IdempotencyReplayed',
  /** A duplicate arrived while the original ran (409); the handler did not run. */
  inFlight: 'IdempotencyInFlight',
  /** The key came back with another body (422). */
  mismatch: 'IdempotencyMismatch',
  /** The Idempotency-Key was missing or malformed (400); nothing was stored. */
  keyInvalid: 'IdempotencyKeyInvalid',
  /** The handler's response and staged effects committed with the key. */
  committed: 'IdempotencyCommitted',
  /** The key was given back after a 5xx, a transient 4xx or a thrown error. */
  released: 'IdempotencyReleased',
  /** The handler outlived its lease and another owner took over: nothing of this run was written. */
  leaseLost: 'IdempotencyLeaseLost',
} as const;
export type IdempotencyMetricName = (typeof IdempotencyMetric)[keyof typeof IdempotencyMetric];
