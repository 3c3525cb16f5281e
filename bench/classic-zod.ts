import { z } from 'zod';

/**
 * `zod/mini`'s functions, taken from classic zod the way our schemas imported it before they moved to zod/mini
 * (`import { z } from 'zod'`): through the `z` namespace object, which bundles every part of classic zod whether it
 * is used or not (about 444 KB minified). The cold-start benchmark maps `zod/mini` here to rebuild, from today's
 * schema sources, the Powertools-equivalent handler as it stood when the import-time target was set.
 */
export const {
  array,
  enum: enum_,
  gte: minimum,
  int,
  iso,
  literal,
  looseObject,
  lte: maximum,
  maxLength,
  minLength,
  nonnegative,
  nullable,
  number,
  object,
  optional,
  positive,
  refine,
  regex,
  strictObject,
  string,
} = z;
export { enum_ as enum };

export function extend<T extends z.ZodObject, U extends z.core.$ZodLooseShape>(schema: T, shape: U) {
  return schema.extend(shape);
}
