import { InvalidNaturalRequestError } from '../../engine/errors.js';

/** A `SET` clause over top-level attributes, every name and value behind a placeholder. */
export interface SetClause {
  /** `#s0 = :s0, #s1 = :s1`, without the `SET` keyword, so it can be joined with other assignments. */
  readonly assignments: string;
  readonly names: Record<string, string>;
  readonly values: Record<string, unknown>;
}

/**
 * Builds the assignments that set each attribute to a fixed value. Names go through placeholders, so reserved words
 * (`status`, `name`) and names with dots are taken literally as top-level attributes, never as paths.
 * Setting fixed values is what makes such an update idempotent: applying it twice leaves the item as once.
 */
export function setClause(values: Readonly<Record<string, unknown>>, prefix: string): SetClause {
  const names: Record<string, string> = {};
  const placeholders: Record<string, unknown> = {};
  const assignments = Object.entries(values).map(([attribute, value], index) => {
    if (value === undefined) {
      throw new InvalidNaturalRequestError(`the value for ${attribute} is undefined; remove it or give a value`);
    }
    names[`#${prefix}${index}`] = attribute;
    placeholders[`:${prefix}${index}`] = value;
    return `#${prefix}${index} = :${prefix}${index}`;
  });
  return { assignments: assignments.join(', '), names, values: placeholders };
}

/** Key attributes can't be updated (DynamoDB refuses); say so before sending anything. */
export function assertNoKeyAttributes(
  attributes: Iterable<string>,
  key: Readonly<Record<string, unknown>>,
  what: string,
): void {
  for (const attribute of attributes) {
    if (Object.hasOwn(key, attribute)) {
      throw new InvalidNaturalRequestError(`${what} includes the key attribute ${attribute}, which can't be updated`);
    }
  }
}
