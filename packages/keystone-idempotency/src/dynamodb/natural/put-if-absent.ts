import { type AttributeValue, ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { InvalidNaturalRequestError, NaturalIdempotencyError } from '../../engine/errors.js';

type Item = Record<string, unknown>;

export interface PutIfAbsentInput {
  readonly TableName: string;
  /** The whole item, key attributes included. */
  readonly Item: Item;
  /** The table's key attributes (partition key, then sort key if any): the identity of "the same item". */
  readonly keyAttributes: readonly [string, ...string[]];
}

/**
 * `created`: this call wrote the item. `exists`: an item with this key was already there and is left untouched;
 * `item` is that existing item, as stored (it may differ from the one offered).
 */
export type PutIfAbsentResult<T extends Item = Item> =
  | { readonly kind: 'created'; readonly item: T }
  | { readonly kind: 'exists'; readonly item: T };

/** An item deleted between the failed put and our read of it: try the put again, a bounded number of times. */
const MAX_ROUNDS = 3;

/**
 * Writes an item only if none with its key exists: natural idempotency for "create" operations whose key is derived
 * from the request (an order id, an event id), with no key store involved. A retry, or any number of concurrent
 * calls, creates the item once; every other call learns the stored item from the same request.
 *
 * @example
 * const result = await putIfAbsent(client, {
 *   TableName: 'payments',
 *   Item: { pk: 'ORDER#42', sk: 'PAYMENT', amount: 1200 },
 *   keyAttributes: ['pk', 'sk'],
 * });
 * if (result.kind === 'exists') log.info('already recorded', { amount: result.item.amount });
 */
export async function putIfAbsent<T extends Item = Item>(
  client: DynamoDBDocumentClient,
  input: PutIfAbsentInput,
): Promise<PutIfAbsentResult<T>> {
  const key = keyOf(input);
  const names = Object.fromEntries(input.keyAttributes.map((attribute, index) => [`#k${index}`, attribute]));
  for (let round = 0; round < MAX_ROUNDS; round++) {
    try {
      await client.send(
        new PutCommand({
          TableName: input.TableName,
          Item: input.Item,
          // The condition is evaluated against the item stored under this exact key, so "its key attributes don't
          // exist" means "no item with this key": of any number of concurrent puts exactly one passes, and none
          // overwrites an item that another one wrote.
          ConditionExpression: Object.keys(names)
            .map((name) => `attribute_not_exists(${name})`)
            .join(' AND '),
          ExpressionAttributeNames: names,
          // The existing item comes back on the failure itself: a duplicate costs one request, not two.
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { kind: 'created', item: input.Item as T };
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      // Even through the DocumentClient, the item on this error is in raw AttributeValue form.
      const raw = error.Item as Record<string, AttributeValue> | undefined;
      const existing = raw
        ? unmarshall(raw)
        : (await client.send(new GetCommand({ TableName: input.TableName, Key: key, ConsistentRead: true }))).Item;
      if (existing) return { kind: 'exists', item: existing as T };
    }
  }
  // Created and deleted under us again and again: not a state this helper can answer for.
  throw new NaturalIdempotencyError(`putIfAbsent: the item in ${input.TableName} kept appearing and disappearing`);
}

function keyOf(input: PutIfAbsentInput): Item {
  const key: Item = {};
  for (const attribute of input.keyAttributes) {
    if (input.Item[attribute] === undefined) {
      throw new InvalidNaturalRequestError(`the item has no value for its key attribute ${attribute}`);
    }
    key[attribute] = input.Item[attribute];
  }
  return key;
}
