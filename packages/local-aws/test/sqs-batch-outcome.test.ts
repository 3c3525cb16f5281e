import type { SQSRecord } from 'aws-lambda';
import { TooManyRequestsException } from '../src/lambda-invoke';
import { judgeBatch, recordsToDelete } from '../src/sqs-batch-outcome';

const records = ['m-1', 'm-2', 'm-3'].map((messageId) => ({ messageId }) as SQSRecord);

function deleted(value: unknown, reportBatchItemFailures = true): string[] {
  const verdict = judgeBatch({ kind: 'returned', value }, records, reportBatchItemFailures);
  return recordsToDelete(verdict, records).map((record) => record.messageId);
}

describe('judgeBatch', () => {
  it.each([
    ['undefined', undefined],
    ['null', null],
    ['an empty object', {}],
    ['a null list', { batchItemFailures: null }],
    ['an empty list', { batchItemFailures: [] }],
  ])('treats %s as a complete success', (_name, value) => {
    expect(deleted(value)).toEqual(['m-1', 'm-2', 'm-3']);
  });

  it('deletes all but the listed failures', () => {
    expect(deleted({ batchItemFailures: [{ itemIdentifier: 'm-2' }] })).toEqual(['m-1', 'm-3']);
  });

  it.each([
    ['an empty identifier', { batchItemFailures: [{ itemIdentifier: '' }] }],
    ['a null identifier', { batchItemFailures: [{ itemIdentifier: null }] }],
    ['a misspelt key', { batchItemFailures: [{ itemIdentifer: 'm-1' }] }],
    ['an id from another batch', { batchItemFailures: [{ itemIdentifier: 'm-9' }] }],
    ['a list that is not a list', { batchItemFailures: 'm-1' }],
  ])('fails the whole batch on %s', (_name, value) => {
    expect(deleted(value)).toEqual([]);
  });

  it('fails the whole batch on an error, a timeout or a throttle that outlasted its retries', () => {
    const threw = judgeBatch({ kind: 'threw', error: new Error('x') }, records, true);
    const timedOut = judgeBatch({ kind: 'timed-out', timeoutMs: 100 }, records, true);
    const throttled = judgeBatch(
      { kind: 'throttled', error: new TooManyRequestsException('f', 'ConcurrentInvocationLimitExceeded', 'busy') },
      records,
      true,
    );

    expect(recordsToDelete(threw, records)).toEqual([]);
    expect(recordsToDelete(timedOut, records)).toEqual([]);
    expect(recordsToDelete(throttled, records)).toEqual([]);
    expect(timedOut).toEqual({ kind: 'all-failed', reason: 'Task timed out after 100 ms' });
  });

  it('ignores the response when ReportBatchItemFailures is off', () => {
    expect(deleted({ batchItemFailures: [{ itemIdentifier: 'm-2' }] }, false)).toEqual(['m-1', 'm-2', 'm-3']);
  });
});
