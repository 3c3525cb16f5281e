import type { SQSRecord } from 'aws-lambda';
import type { InvocationOutcome } from './lambda-invoke';

/** What the event source mapping does with a batch once the function has answered. */
export type BatchVerdict =
  | { readonly kind: 'all-succeeded' }
  | { readonly kind: 'partially-failed'; readonly failedMessageIds: readonly string[] }
  | { readonly kind: 'all-failed'; readonly reason: string };

/**
 * Decides which messages of a batch Lambda's SQS event source mapping deletes, given how the invocation ended.
 *
 * With `ReportBatchItemFailures` on, as AWS documents it:
 * - an error or a timeout fails the whole batch;
 * - `undefined`, `null`, `{}` or an empty `batchItemFailures` list is a complete success;
 * - listed `itemIdentifier`s fail, the rest succeed;
 * - an identifier that is empty, missing or not a message of the batch (or a list that isn't a list) fails the
 *   whole batch: Lambda can't tell which messages were processed, so it retries them all.
 * Without it, any normal return is a complete success and the response is ignored.
 */
export function judgeBatch(
  outcome: InvocationOutcome<unknown>,
  records: readonly SQSRecord[],
  reportBatchItemFailures: boolean,
): BatchVerdict {
  if (outcome.kind === 'threw') return { kind: 'all-failed', reason: 'the function threw' };
  if (outcome.kind === 'throttled') return { kind: 'all-failed', reason: 'the function was throttled' };
  if (outcome.kind === 'timed-out') {
    return { kind: 'all-failed', reason: `Task timed out after ${outcome.timeoutMs} ms` };
  }
  if (!reportBatchItemFailures) return { kind: 'all-succeeded' };

  const response: unknown = outcome.value;
  if (response === undefined || response === null || typeof response !== 'object') return { kind: 'all-succeeded' };
  const failures: unknown = (response as { batchItemFailures?: unknown }).batchItemFailures;
  if (failures === undefined || failures === null) return { kind: 'all-succeeded' };
  if (!Array.isArray(failures)) return { kind: 'all-failed', reason: 'batchItemFailures is not a list' };
  if (failures.length === 0) return { kind: 'all-succeeded' };

  const batchIds = new Set(records.map((record) => record.messageId));
  const failedMessageIds: string[] = [];
  for (const failure of failures) {
    const id: unknown = (failure as { itemIdentifier?: unknown } | null)?.itemIdentifier;
    if (typeof id !== 'string' || !batchIds.has(id)) {
      return { kind: 'all-failed', reason: `invalid itemIdentifier ${JSON.stringify(id ?? null)}` };
    }
    failedMessageIds.push(id);
  }
  return { kind: 'partially-failed', failedMessageIds };
}

/** The records to delete from the queue after the verdict: exactly those that succeeded. */
export function recordsToDelete(verdict: BatchVerdict, records: readonly SQSRecord[]): SQSRecord[] {
  if (verdict.kind === 'all-failed') return [];
  if (verdict.kind === 'all-succeeded') return [...records];
  const failed = new Set(verdict.failedMessageIds);
  return records.filter((record) => !failed.has(record.messageId));
}
