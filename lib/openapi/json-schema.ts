import { type $ZodType, toJSONSchema } from 'zod/v4/core';

/** A JSON Schema as plain data (2020-12 for OpenAPI 3.1, draft-04 for API Gateway models). */
export type JsonSchema = Record<string, unknown>;

/**
 * Which side of a schema to describe: a request body is what a client may send (`input`: defaults make a field
 * optional, a plain object allows unknown fields); a response is what we send (`output`: objects are closed, so an
 * undocumented field in a response is a contract failure, not a surprise).
 */
export type SchemaSide = 'request' | 'response';

/**
 * A zod schema as a JSON Schema 2020-12 object, the dialect of OpenAPI 3.1 schema objects. Uses zod's own
 * `toJSONSchema` from `zod/v4/core`, which takes classic and `zod/mini` schemas alike. The `$schema` member is
 * dropped: inside an OpenAPI 3.1 document the dialect is the document's.
 *
 * Refinements (`.refine`) cannot be expressed and are left out, silently: so a handler's schema states its rules as
 * checks JSON Schema has (an enum, a pattern, a length), and test/openapi draws bodies from the document to check
 * that the handlers accept every one it calls valid. A schema zod cannot represent at all (a transform, a date
 * object) throws here, at build time, rather than producing a document that silently says less.
 */
export function openApiSchema(schema: $ZodType, side: SchemaSide): JsonSchema {
  const { $schema: _dialect, ...rest } = toJSONSchema(schema, {
    target: 'draft-2020-12',
    io: side === 'request' ? 'input' : 'output',
  }) as JsonSchema;
  return rest;
}
