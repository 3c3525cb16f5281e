/**
 * The SQS adapter: exactly-once effects from at-least-once delivery, on the idempotency engine and Powertools'
 * batch processor.
 */
export {
  DeadLetterError,
  InvalidRecordKeyError,
  RecordFencedError,
  RecordInFlightError,
  RecordMismatchError,
  RetryLaterError,
  SqsIdempotencyError,
} from './errors.js';
export {
  makeSqsIdempotentHandler,
  queueUrlOf,
  type SqsCommandSender,
  type SqsIdempotentHandler,
  type SqsIdempotentHandlerOptions,
  type SqsLogger,
  type SqsQueueAccess,
} from './handler.js';
export { type RecordIdentity, type RecordIdentityOptions, recordIdentity } from './identity.js';
export { SQS_TEXT, sqsMessageBody } from './message-body.js';
export {
  type ProcessRecordOptions,
  processRecordIdempotently,
  type RecordOutcome,
  type SqsRecordFunction,
} from './process-record.js';
export type { SqsRecordContext } from './record-context.js';
export { byBodyField, byMessageAttribute, byMessageId, fromBody, type RecordKeySource } from './record-key.js';
