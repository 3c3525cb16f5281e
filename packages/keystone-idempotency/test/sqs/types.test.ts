import { Logger } from '@aws-lambda-powertools/logger';
import type { SQSHandler } from 'aws-lambda';
import { DynamoDbStore } from '../../src/dynamodb/store';
import { makeSqsIdempotentHandler, type RecordOutcome, type SqsLogger } from '../../src/sqs';
import { localDocumentClient } from '../support/dynamodb';

/**
 * Locks the public types: these assignments are checked by `tsc` (typecheck covers tests); the runtime assertions
 * only keep jest from calling the file empty.
 */
describe('public types', () => {
  it('accepts Powertools’ Logger and console as the logger', () => {
    const loggers: SqsLogger[] = [new Logger({ logLevel: 'SILENT' }), console];
    expect(loggers).toHaveLength(2);
  });

  it('makes a handler Lambda accepts for an SQS event source', () => {
    const store = new DynamoDbStore({ client: localDocumentClient(), tableName: 'unused' });
    const handler: SQSHandler = makeSqsIdempotentHandler({
      store,
      name: 'types',
      process: async (_record, ctx) => ({ downstreamKey: ctx.downstreamKey }),
    });
    expect(typeof handler).toBe('function');
  });

  it('narrows an outcome by kind', () => {
    const describe = (outcome: RecordOutcome<{ n: number }>): string => {
      switch (outcome.kind) {
        case 'committed':
        case 'replay':
          return `done ${outcome.summary.n}`;
        case 'in_flight':
          return `retry in ${outcome.retryAfterMs}`;
        case 'failed':
          return `failed, released: ${outcome.released}`;
        case 'fenced':
        case 'mismatch':
          return outcome.kind;
      }
    };
    expect(describe({ kind: 'replay', key: 'k', summary: { n: 1 } })).toBe('done 1');
  });
});
