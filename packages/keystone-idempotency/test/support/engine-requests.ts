import {
  type DynamoDbRequestBody,
  DynamoDbTarget,
  type RequestMatcher,
} from '@keystone-idempotency/local-aws/dynamodb-fault-proxy';
import { RecordAttribute as A } from '../../src/dynamodb/layout';
import { RecordStatus } from '../../src/engine/record';

/**
 * The idempotency engine's requests as DynamoDB sees them, by step: the one place that knows what a claim, a
 * takeover, a commit and a release look like on the wire (packages/keystone-idempotency/src/engine/store.ts writes them).
 *
 * They are told apart by facts that survive the engine's growth: the operation, the table, the record's key and,
 * for an update, the status it sets. Never by expression strings or the set of attributes written: those change
 * whenever the record gains an attribute. If a step changes shape (a takeover becomes a put, say), its matcher stops
 * matching, the fault never fires, and the test that armed it fails on `fired()`: it can't pass for the wrong reason.
 *
 * @param tableName the idempotency table
 */
export function engineRequests(tableName: string) {
  const onTable = (body: DynamoDbRequestBody) => body.TableName === tableName;
  return {
    /** A fresh claim: the engine's one PutItem on the idempotency table. */
    claim: (key: string): RequestMatcher => ({
      name: `claim of ${key}`,
      target: DynamoDbTarget.PutItem,
      when: (body) => onTable(body) && stringOf(field(body.Item, A.key)) === key,
    }),
    /** A takeover of a released or expired record: an update that sets the record back to IN_PROGRESS. */
    takeover: (key: string): RequestMatcher => ({
      name: `takeover of ${key}`,
      target: DynamoDbTarget.UpdateItem,
      when: (body) => onTable(body) && keyOf(body) === key && statusSetBy(body) === RecordStatus.InProgress,
    }),
    /** A release after a transient failure: an update that sets the record to RELEASED. */
    release: (key: string): RequestMatcher => ({
      name: `release of ${key}`,
      target: DynamoDbTarget.UpdateItem,
      when: (body) => onTable(body) && keyOf(body) === key && statusSetBy(body) === RecordStatus.Released,
    }),
    /**
     * A commit with effects: a transaction with an action on this record (the completion, beside the caller's
     * effects).
     */
    commit: (key: string): RequestMatcher => ({
      name: `commit of ${key}`,
      target: DynamoDbTarget.TransactWriteItems,
      when: (body) =>
        asArray(body.TransactItems).some((item) =>
          Object.values(asRecord(item)).some((action) => {
            const a = asRecord(action);
            const itemKey = stringOf(field(a.Key, A.key)) ?? stringOf(field(a.Item, A.key));
            return a.TableName === tableName && itemKey === key;
          }),
        ),
    }),
    /** A commit with nothing staged: the completion alone, an update that sets the record to COMPLETED. */
    completion: (key: string): RequestMatcher => ({
      name: `completion of ${key}`,
      target: DynamoDbTarget.UpdateItem,
      when: (body) => onTable(body) && keyOf(body) === key && statusSetBy(body) === RecordStatus.Completed,
    }),
    /** A strongly consistent read of the record (polling, or checking a commit whose reply was lost). */
    read: (key: string): RequestMatcher => ({
      name: `read of ${key}`,
      target: DynamoDbTarget.GetItem,
      when: (body) => onTable(body) && keyOf(body) === key,
    }),
  };
}

export type EngineRequests = ReturnType<typeof engineRequests>;

function keyOf(body: DynamoDbRequestBody): string | undefined {
  return stringOf(field(body.Key, A.key));
}

/**
 * The status an UpdateItem's SET clause assigns, with its `#name` and `:value` placeholders resolved. The values
 * alone can't tell a release from a takeover: each also carries the other's status for its condition (a release
 * checks IN_PROGRESS; the takeover of a released record checks RELEASED).
 */
function statusSetBy(body: DynamoDbRequestBody): string | undefined {
  const expression = typeof body.UpdateExpression === 'string' ? body.UpdateExpression : '';
  const names = asRecord(body.ExpressionAttributeNames);
  const values = asRecord(body.ExpressionAttributeValues);
  // The SET clause runs until the next clause keyword (not a placeholder that merely starts with one).
  const set = /\bSET\b([\s\S]*?)(?=(?<![#:\w])(?:REMOVE|ADD|DELETE)\b|$)/i.exec(expression)?.[1] ?? '';
  for (const [, path = '', value = ''] of set.matchAll(/(#?\w+)\s*=\s*(:\w+)/g)) {
    const attribute = path.startsWith('#') ? names[path] : path;
    if (attribute === A.status) return stringOf(values[value]);
  }
  return undefined;
}

function field(map: unknown, name: string): unknown {
  return asRecord(map)[name];
}

/** The string inside an AttributeValue (`{"S": "..."}`), if it is one. */
function stringOf(attributeValue: unknown): string | undefined {
  const value = asRecord(attributeValue).S;
  return typeof value === 'string' ? value : undefined;
}

function asRecord(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/** The attribute a claim's item carries its lease token in: what a fault test follows an owner's writes by. */
export const LEASE_TOKEN_ATTRIBUTE = A.leaseToken;
