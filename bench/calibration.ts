import { randomUUID } from 'node:crypto';
import {
  CreateTableCommand,
  DynamoDBClient,
  PutItemCommand,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import { type LatencySummary, now, pool, summarize } from './measure';

/**
 * How DynamoDB Local itself behaves on this machine, measured before anything else (it also warms the JVM): the raw
 * requests the variants are made of, sent with the bare client and no library logic, one at a time and 50 at once.
 *
 * - It is the physical limit each path is compared with: a replay can't be cheaper than one refused conditional put.
 * - It explains results that belong to the emulator and not to the code under test: DynamoDB Local runs transactions
 *   one at a time, so their throughput stays flat (or drops) under concurrency while single-item writes scale. Real
 *   DynamoDB runs transactions on different items in parallel.
 */
export interface Calibration {
  readonly operations: number;
  /** Conditional PutItem of a new item. */
  readonly put: CalibrationRow;
  /** Conditional PutItem refused, returning the existing (completed-record-sized) item: a replay's one request. */
  readonly refusedPut: CalibrationRow;
  /** TransactWriteItems of two new items. */
  readonly transaction: CalibrationRow;
  /** The same, cancelled by a failed condition, returning the existing item. */
  readonly refusedTransaction: CalibrationRow;
}

export interface CalibrationRow {
  /** One at a time: latency of each request. */
  readonly sequentialMs: LatencySummary;
  /** 50 in flight: requests per second. */
  readonly concurrentPerSecond: number;
}

const CONCURRENCY = 50;

export async function calibrate(endpoint: string, operations: number): Promise<Calibration> {
  const client = new DynamoDBClient({
    endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  const table = 'bench-calibration';
  try {
    await client.send(
      new CreateTableCommand({
        TableName: table,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      }),
    );
    const item = () => ({ pk: { S: randomUUID() }, payload: { S: 'x'.repeat(400) } });
    // About the size of a completed record with its stored response (see itemSizes in the report).
    const existing = { pk: { S: 'existing' }, payload: { S: 'x'.repeat(700) } };
    await client.send(new PutItemCommand({ TableName: table, Item: existing }));
    const guarded = {
      ConditionExpression: 'attribute_not_exists(pk)',
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const,
    };
    const refused = (request: Promise<unknown>) =>
      request.then(
        () => Promise.reject(new Error('the condition should have failed')),
        (error: Error) => {
          if (error.name !== 'ConditionalCheckFailedException' && error.name !== 'TransactionCanceledException') {
            throw error;
          }
        },
      );
    const refusedPut = () => refused(client.send(new PutItemCommand({ TableName: table, Item: existing, ...guarded })));
    const refusedTransaction = () =>
      refused(
        client.send(
          new TransactWriteItemsCommand({
            TransactItems: [
              { Put: { TableName: table, Item: item(), ConditionExpression: 'attribute_not_exists(pk)' } },
              { Put: { TableName: table, Item: existing, ...guarded } },
            ],
          }),
        ),
      );
    const put = () =>
      client.send(
        new PutItemCommand({ TableName: table, Item: item(), ConditionExpression: 'attribute_not_exists(pk)' }),
      );
    const transaction = () =>
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { Put: { TableName: table, Item: item(), ConditionExpression: 'attribute_not_exists(pk)' } },
            { Put: { TableName: table, Item: item(), ConditionExpression: 'attribute_not_exists(pk)' } },
          ],
        }),
      );
    // Warm-up: the JVM runs with C1 only (-XX:TieredStopAtLevel=1) and is much slower until it has compiled the paths.
    await pool(operations, CONCURRENCY, async () => {
      await Promise.all([put(), refusedPut(), transaction(), refusedTransaction()]);
    });
    return {
      operations,
      put: await row(put, operations),
      refusedPut: await row(refusedPut, operations),
      transaction: await row(transaction, operations),
      refusedTransaction: await row(refusedTransaction, operations),
    };
  } finally {
    client.destroy();
  }
}

async function row(operation: () => Promise<unknown>, operations: number): Promise<CalibrationRow> {
  const latencies: number[] = [];
  for (let i = 0; i < operations; i++) {
    const started = now();
    await operation();
    latencies.push(now() - started);
  }
  const started = now();
  await pool(operations, CONCURRENCY, async () => {
    await operation();
  });
  return { sequentialMs: summarize(latencies), concurrentPerSecond: operations / ((now() - started) / 1000) };
}
