import { type AttributeValue, ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, UpdateCommand, type UpdateCommandInput } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { InvalidNaturalRequestError } from '../../engine/errors.js';
import type { EffectItem } from '../store.js';
import { assertNoKeyAttributes, setClause } from './set-clause.js';

type Item = Record<string, unknown>;

export interface CompareAndSetInput {
  readonly TableName: string;
  readonly Key: Readonly<Item>;
  /** The attribute that holds the state, e.g. `status`. A top-level attribute; not a key attribute. */
  readonly attribute: string;
  /** The state the transition starts from. The item changes only if it holds exactly this value. */
  readonly expected: unknown;
  /** The state the transition ends in. */
  readonly next: unknown;
  /** Further attributes to set with the transition, e.g. `{ settledAt: '2026-11-30T12:00:00Z' }`. */
  readonly set?: Readonly<Item>;
}

/**
 * `changed`: this call made the transition; `item` is the item after it. `unchanged`: the item did not hold
 * `expected` (a repeat finds it at `next` already; a competing transition finds another state), nothing was
 * written, and `item` is the item as it stands. `missing`: there is no item under this key, and none was created.
 */
export type CompareAndSetResult<T extends Item = Item> =
  | { readonly kind: 'changed'; readonly item: T }
  | { readonly kind: 'unchanged'; readonly item: T }
  | { readonly kind: 'missing' };

/**
 * Moves one item from one state to the next, once: natural idempotency for state transitions (`succeeded` →
 * `settled`). The first call changes the item; repeats, and all but one of any concurrent calls, change nothing and
 * say so, together with the item as it stands, in one request.
 *
 * @example
 * const result = await compareAndSet(client, {
 *   TableName: 'payments',
 *   Key: { pk: 'ACCOUNT#a1', sk: 'PAYMENT#p1' },
 *   attribute: 'status',
 *   expected: 'succeeded',
 *   next: 'settled',
 *   set: { settledAt: now.toISOString() },
 * });
 * if (result.kind === 'unchanged' && result.item.status === 'settled') return; // a repeat: already done
 */
export async function compareAndSet<T extends Item = Item>(
  client: DynamoDBDocumentClient,
  input: CompareAndSetInput,
): Promise<CompareAndSetResult<T>> {
  try {
    const { Attributes } = await client.send(
      new UpdateCommand({ ...compareAndSetUpdate(input), ReturnValues: 'ALL_NEW' }),
    );
    return { kind: 'changed', item: Attributes as T };
  } catch (error) {
    if (!(error instanceof ConditionalCheckFailedException)) throw error;
    // No old item on the failure means there is none: the condition failed on a missing attribute of a missing item.
    const raw = error.Item as Record<string, AttributeValue> | undefined;
    return raw ? { kind: 'unchanged', item: unmarshall(raw) as T } : { kind: 'missing' };
  }
}

/**
 * The same transition as a transaction item, to stage into an engine commit (or any TransactWriteItems): the
 * transition and the idempotency key's completion then happen together or not at all. If the item doesn't hold
 * `expected`, the whole transaction is cancelled (the engine reports `EffectConditionFailedError` with the item).
 *
 * @example
 * ctx.stage(
 *   compareAndSetEffect({ TableName: 'payments', Key, attribute: 'status', expected: 'succeeded', next: 'settled' }),
 * );
 */
export function compareAndSetEffect(input: CompareAndSetInput): EffectItem {
  return { Update: compareAndSetUpdate(input) };
}

function compareAndSetUpdate(input: CompareAndSetInput) {
  if (input.expected === undefined || input.next === undefined) {
    throw new InvalidNaturalRequestError('compareAndSet needs both an expected and a next value');
  }
  const extra = input.set ?? {};
  assertNoKeyAttributes([input.attribute, ...Object.keys(extra)], input.Key, 'compareAndSet');
  if (Object.hasOwn(extra, input.attribute)) {
    throw new InvalidNaturalRequestError(`set includes ${input.attribute}; the transition itself sets it`);
  }
  const others = setClause(extra, 's');
  return {
    TableName: input.TableName,
    Key: input.Key,
    UpdateExpression: `SET #state = :next${others.assignments ? `, ${others.assignments}` : ''}`,
    // The transition happens only from `expected`. A repeat finds `next` and writes nothing; of concurrent callers
    // exactly one sees `expected`. A missing item has no such attribute, so the update never creates an item.
    ConditionExpression: '#state = :expected',
    ExpressionAttributeNames: { '#state': input.attribute, ...others.names },
    ExpressionAttributeValues: { ':expected': input.expected, ':next': input.next, ...others.values },
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  } satisfies UpdateCommandInput;
}
