import { type DynamoDBDocumentClient, UpdateCommand, type UpdateCommandInput } from '@aws-sdk/lib-dynamodb';
import { InvalidNaturalRequestError } from '../../engine/errors.js';
import type { EffectItem } from '../store.js';
import { assertNoKeyAttributes, setClause } from './set-clause.js';

type Item = Record<string, unknown>;

export interface UpsertInput {
  readonly TableName: string;
  readonly Key: Readonly<Item>;
  /** Fixed values for top-level attributes (not key attributes). Attributes not named here are left as they are. */
  readonly values: Readonly<Item>;
}

/**
 * Sets attributes to fixed values, creating the item if needed: idempotent by construction, since applying the same
 * assignment twice leaves the item as applying it once. Returns the item as it stands afterwards.
 *
 * Only fixed values: `count = count + 1` or `list_append` are not idempotent and have no place here.
 *
 * @example
 * const profile = await upsert(client, {
 *   TableName: 'profiles',
 *   Key: { pk: 'USER#u1', sk: 'PROFILE' },
 *   values: { email: 'ada@example.com', verified: true },
 * });
 */
export async function upsert<T extends Item = Item>(client: DynamoDBDocumentClient, input: UpsertInput): Promise<T> {
  const { Attributes } = await client.send(new UpdateCommand({ ...upsertUpdate(input), ReturnValues: 'ALL_NEW' }));
  return Attributes as T;
}

/**
 * The same upsert as a transaction item, to stage into an engine commit.
 *
 * @example
 * ctx.stage(upsertEffect({ TableName: 'profiles', Key: { pk: 'USER#u1', sk: 'PROFILE' }, values: { verified: true } }));
 */
export function upsertEffect(input: UpsertInput): EffectItem {
  return { Update: upsertUpdate(input) };
}

function upsertUpdate(input: UpsertInput) {
  const attributes = Object.keys(input.values);
  if (attributes.length === 0) throw new InvalidNaturalRequestError('upsert needs at least one value to set');
  assertNoKeyAttributes(attributes, input.Key, 'upsert');
  const clause = setClause(input.values, 'v');
  return {
    TableName: input.TableName,
    Key: input.Key,
    // Unconditional on purpose: every attempt converges on the same values, so there is no race to close.
    UpdateExpression: `SET ${clause.assignments}`,
    ExpressionAttributeNames: clause.names,
    ExpressionAttributeValues: clause.values,
  } satisfies UpdateCommandInput;
}
