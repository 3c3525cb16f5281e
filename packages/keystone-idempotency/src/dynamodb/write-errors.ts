import {
  type AttributeValue,
  ConditionalCheckFailedException,
  TransactionCanceledException,
} from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { IdempotencyRecord } from '../engine/record.js';
import { recordFromRaw } from './codec.js';

/**
 * What a failed write tells the fencing rule, translated from the SDK's errors in one place: which condition failed,
 * and the record (or effect item) DynamoDB returned with it.
 */

/** The record a failed conditional single-item write met, or undefined when the error is not a failed condition. */
export function conditionFailure(error: unknown): { record: IdempotencyRecord | undefined } | undefined {
  if (!(error instanceof ConditionalCheckFailedException)) return undefined;
  return { record: recordFromRaw(error.Item as Record<string, AttributeValue> | undefined) };
}

/**
 * Why a TransactWriteItems was cancelled, with the record's action at `recordIndex`:
 * - `record`: the record's own condition failed (another owner, or our own earlier completion); the record it met;
 * - `effect`: one of the caller's items failed its condition; its index and the item it met;
 * - `conflict`: another transaction touched one of the items; nothing was written, and it may simply be sent again;
 * - undefined: not a cancellation this rule knows (throttling, validation): the caller rethrows it.
 */
export type TransactionFailure =
  | { readonly kind: 'record'; readonly record: IdempotencyRecord | undefined }
  | { readonly kind: 'effect'; readonly index: number; readonly item: Record<string, unknown> | undefined }
  | { readonly kind: 'conflict' };

export function transactionFailure(error: unknown, recordIndex: number): TransactionFailure | undefined {
  if (!(error instanceof TransactionCanceledException)) return undefined;
  const reasons = error.CancellationReasons ?? [];
  const recordReason = reasons[recordIndex];
  if (recordReason?.Code === 'ConditionalCheckFailed') {
    return { kind: 'record', record: recordFromRaw(recordReason.Item as Record<string, AttributeValue> | undefined) };
  }
  const effectIndex = reasons.findIndex((reason) => reason.Code === 'ConditionalCheckFailed');
  if (effectIndex >= 0) {
    const raw = reasons[effectIndex]?.Item as Record<string, AttributeValue> | undefined;
    return { kind: 'effect', index: effectIndex, item: raw ? unmarshall(raw) : undefined };
  }
  // Real DynamoDB may say TransactionConflict where DynamoDB Local says ConditionalCheckFailed; both handled.
  if (reasons.some((reason) => reason.Code === 'TransactionConflict')) return { kind: 'conflict' };
  return undefined;
}
