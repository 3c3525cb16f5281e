import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type RefusedWrite, type Units, unitsFor } from './capacity';

/** Item and transaction operations accept `ReturnConsumedCapacity`; control-plane calls (CreateTable, ...) reject it. */
const CAPACITY_COMMANDS = new Set([
  'GetItemCommand',
  'PutItemCommand',
  'UpdateItemCommand',
  'DeleteItemCommand',
  'QueryCommand',
  'ScanCommand',
  'BatchGetItemCommand',
  'BatchWriteItemCommand',
  'TransactGetItemsCommand',
  'TransactWriteItemsCommand',
]);

/** One HTTP request to DynamoDB, as the client saw it. */
export interface MeteredRequest {
  /** `PutItem`, `TransactWriteItems`, ... */
  readonly operation: string;
  /** The error's name when DynamoDB refused it (`ConditionalCheckFailedException`, ...). */
  readonly error?: string;
  readonly units: Units;
}

export interface RequestMeter {
  /** Requests since the last reset, in the order sent. */
  readonly requests: readonly MeteredRequest[];
  reset(): void;
  /** Stops recording, for setup and verification traffic; `resume()` starts again. */
  pause(): void;
  resume(): void;
}

/**
 * Meters a DynamoDB client: every HTTP request it sends, and the capacity each one consumed.
 *
 * - `initialize`: adds `ReturnConsumedCapacity: 'TOTAL'` to every item and transaction command, so DynamoDB reports
 *   what it charged. Powertools' own commands go through the same client and are metered alike.
 * - `deserialize`, high priority: runs once per attempt (inside the retry middleware, as in
 *   test/support/request-counter.ts, so an SDK retry counts as the request it is) and outside the deserializer, so it
 *   sees the parsed output, or the typed error with the existing item that `ReturnValuesOnConditionCheckFailure`
 *   brings back.
 */
export function meterRequests(client: DynamoDBClient): RequestMeter {
  const requests: MeteredRequest[] = [];
  let paused = false;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (CAPACITY_COMMANDS.has(context.commandName ?? '')) {
        (args.input as Record<string, unknown>).ReturnConsumedCapacity = 'TOTAL';
      }
      return next(args);
    },
    { step: 'initialize', name: 'benchReturnConsumedCapacity', priority: 'low', override: true },
  );
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const operation = (context.commandName ?? 'Unknown').replace(/Command$/, '');
      const input = args.input as Record<string, unknown>;
      try {
        const result = await next(args);
        if (!paused) {
          const reported = totalUnits((result.output as { ConsumedCapacity?: unknown }).ConsumedCapacity);
          requests.push({ operation, units: unitsFor(operation, input, { reported }) });
        }
        return result;
      } catch (error) {
        if (!paused) {
          const refused = error as RefusedWrite & Error;
          requests.push({ operation, error: refused.name, units: unitsFor(operation, input, { refused }) });
        }
        throw error;
      }
    },
    { step: 'deserialize', name: 'benchMeterRequests', priority: 'high', override: true },
  );
  return {
    requests,
    reset() {
      requests.length = 0;
    },
    pause() {
      paused = true;
    },
    resume() {
      paused = false;
    },
  };
}

/** `ConsumedCapacity` is one object (single-item operations) or one per table (transactions, batches). */
function totalUnits(consumed: unknown): number | undefined {
  if (consumed === undefined) return undefined;
  const entries = (Array.isArray(consumed) ? consumed : [consumed]) as { CapacityUnits?: number }[];
  return entries.reduce((sum, entry) => sum + (entry.CapacityUnits ?? 0), 0);
}
