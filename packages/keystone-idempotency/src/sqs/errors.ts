import { IdempotencyError, type LeaseLostError } from '../engine/errors.js';
import type { IdempotencyRecord } from '../engine/record.js';

/**
 * Root of the SQS adapter's errors. A record that must go back to the queue is failed by throwing one of these
 * from the record handler (that is how Powertools' batch processor learns of it), so each names why.
 */
export class SqsIdempotencyError extends IdempotencyError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SqsIdempotencyError';
  }
}

/** The record yielded no usable idempotency key (missing attribute, unparsable body, empty or too long a key). */
export class InvalidRecordKeyError extends SqsIdempotencyError {
  constructor(
    readonly messageId: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super(`message ${messageId} has no usable idempotency key: ${reason}`, options);
    this.name = 'InvalidRecordKeyError';
  }
}

/**
 * Another consumer holds a live lease on this record's key. The record is failed, not acknowledged: the original
 * might still fail, and then this delivery is the one that carries the work. Redelivered, it replays or takes over.
 */
export class RecordInFlightError extends SqsIdempotencyError {
  constructor(
    readonly key: string,
    readonly retryAfterMs: number,
    /** The record found: the other consumer's, in progress (undefined when consumers contended for the key). */
    readonly record: IdempotencyRecord | undefined,
  ) {
    super(`another consumer is processing ${key}; the message will be redelivered`);
    this.name = 'RecordInFlightError';
  }
}

/** The key was used for a message with another body (only when bodies are fingerprinted). */
export class RecordMismatchError extends SqsIdempotencyError {
  constructor(
    readonly key: string,
    /** The record found: the message the key was first used for. */
    readonly record: IdempotencyRecord,
  ) {
    super(`${key} was already used for a message with a different body`);
    this.name = 'RecordMismatchError';
  }
}

/**
 * This consumer's lease ran out and another consumer took the key over before the commit: fencing rejected the
 * commit and none of the staged effects were written. The redelivery replays the new owner's result or retries.
 */
export class RecordFencedError extends SqsIdempotencyError {
  constructor(
    readonly key: string,
    /** The record as the fenced commit found it: the new owner's, or already completed by it. */
    readonly record: IdempotencyRecord | undefined,
    options?: { cause?: LeaseLostError },
  ) {
    super(`the lease on ${key} was taken over before the commit; nothing was written`, options);
    this.name = 'RecordFencedError';
  }
}

/**
 * Thrown by a record function for a record that cannot be processed yet but will be (a webhook that arrived before
 * the row it names was committed). The key is released as for any failure, and the message comes back after
 * `afterMs` (the adapter changes its visibility) instead of after the queue's whole visibility timeout. It is logged
 * as the expected wait it is, and a batch that only waits does not count as a function error.
 */
export class RetryLaterError extends SqsIdempotencyError {
  constructor(
    message: string,
    readonly afterMs: number,
  ) {
    super(message);
    this.name = 'RetryLaterError';
  }
}

/**
 * Thrown by a record function for a record that can never succeed (it contradicts what is recorded). With a
 * dead-letter queue configured on the handler the message is moved there at once, with one clear log line, instead
 * of failing on every receive until SQS's redrive moves it.
 */
export class DeadLetterError extends SqsIdempotencyError {
  constructor(message: string) {
    super(message);
    this.name = 'DeadLetterError';
  }
}
