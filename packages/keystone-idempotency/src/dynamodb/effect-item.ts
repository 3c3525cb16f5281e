import type { TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { EffectKindError } from '../engine/errors.js';

/** The SDK's TransactWriteItems action, in DocumentClient form: its four actions, each optional. */
type TransactWriteAction = NonNullable<TransactWriteCommandInput['TransactItems']>[number];
type ActionName = 'ConditionCheck' | 'Put' | 'Delete' | 'Update';
const ACTION_NAMES: readonly string[] = ['ConditionCheck', 'Put', 'Delete', 'Update'] satisfies ActionName[];

/**
 * One action of a TransactWriteItems, in DocumentClient form: the caller's own puts, updates, deletes and checks,
 * exactly one action per item, as DynamoDB requires.
 *
 * Not the SDK's own `TransactWriteItem`: that one is an intersection with an empty `Omit<...>` whose four members
 * are all optional, so TypeScript's check for "no property in common" never applies to it, and anything that is an
 * object (a PostgreSQL statement, an effect function) passes for one. This type names one action as required, so
 * SQL staged through a DynamoDB store is a compile error at the staging line.
 */
export type EffectItem = {
  [A in ActionName]: { [K in A]: NonNullable<TransactWriteAction[K]> } & { [K in Exclude<ActionName, A>]?: undefined };
}[ActionName];

/**
 * Refuses anything but a DynamoDB transaction item (an object with exactly one of `ConditionCheck`, `Put`, `Delete`,
 * `Update`) with an `EffectKindError`: SQL meant for a PostgreSQL store, say, staged from JavaScript or through a cast.
 */
export function checkTransactionItem(effect: unknown, index: number): void {
  const problem = notATransactionItem(effect);
  if (problem) {
    throw new EffectKindError(
      index,
      `effect ${index} is not a DynamoDB transaction item (an object with exactly one of ConditionCheck, Put, ` +
        `Delete or Update): ${problem}. A DynamoDbStore commits transaction items; nothing was written`,
    );
  }
}

/**
 * Why `effect` is not a transaction item DynamoDB would take, in a few words; undefined when it is one. Names the
 * likely mistake: SQL (a PostgreSQL store's statement, or its effect function) where a DynamoDB item was meant.
 */
function notATransactionItem(effect: unknown): string | undefined {
  if (typeof effect === 'function') return 'it is a function (an effect function of a PostgreSQL store?)';
  if (effect === null || typeof effect !== 'object' || Array.isArray(effect)) {
    return `it is ${effect === null ? 'null' : Array.isArray(effect) ? 'an array' : typeof effect}`;
  }
  const present = Object.entries(effect).filter(([, value]) => value !== undefined);
  const actions = present.filter(([name]) => ACTION_NAMES.includes(name));
  const others = present.filter(([name]) => !ACTION_NAMES.includes(name)).map(([name]) => name);
  if ('text' in effect && typeof (effect as { text: unknown }).text === 'string') {
    return 'it has `text` (a SQL statement, for a PostgreSQL store?)';
  }
  if (actions.length !== 1) {
    return actions.length === 0 ? 'it has none of them' : `it has ${actions.map(([name]) => name).join(' and ')}`;
  }
  if (others.length > 0) return `it also has ${others.join(', ')}`;
  const [name, action] = actions[0] as [string, unknown];
  if (action === null || typeof action !== 'object') return `its ${name} is not an object`;
  return undefined;
}
