import fc from 'fast-check';

type Schema = Record<string, unknown>;

/** The keywords {@link documentedValues} understands. Any other keyword throws: it might be a rule it would miss. */
const KNOWN = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'enum',
  'const',
  'pattern',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'description',
  'items',
  'minItems',
  'maxItems',
]);

/**
 * Characters a schema that states no `pattern` doesn't restrict, with the ones a text rule would most likely be
 * about well represented: control characters, lone surrogates, noncharacters, astral characters, quotes.
 */
const anyChar = fc.oneof(
  fc.constantFrom('\u0000', '\u0001', '\t', '\n', '\r', '"', '\\', '<', ' ', '\uD800', '\uDFFF', '\uFFFE', '\uFFFF'),
  fc.constantFrom('\u{1F600}', '\u{10FFFF}', '\u00E9', 'a', 'Z', '0', '_'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
);

/**
 * Values a JSON Schema (the subset the OpenAPI document's request bodies use) documents as valid, drawn so as to
 * reach the edges of what it states: lengths up to and beyond any length it does not bound, every character where
 * it states no pattern, every member of an enum, unknown members where an object allows them. Every value should
 * validate against the schema (the caller checks with a validator, so a mistake here shows up as one).
 *
 * Throws on a keyword it does not know, rather than ignore a rule and draw values the document refuses.
 */
export function documentedValues(schema: Schema, path = '#'): fc.Arbitrary<unknown> {
  for (const keyword of Object.keys(schema)) {
    if (!KNOWN.has(keyword)) throw new Error(`${path}: no generator for the keyword "${keyword}"; add one`);
  }
  if ('const' in schema) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  const types = Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string];
  const each = types.map((type) => ofType(type, schema, path));
  const [only] = each;
  if (each.length === 1 && only) return only;
  return fc.oneof(...each);
}

function ofType(type: string, schema: Schema, path: string): fc.Arbitrary<unknown> {
  switch (type) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
      return integers(schema);
    case 'string':
      return strings(schema);
    case 'object':
      return objects(schema, path);
    case 'array':
      return arrays(schema, path);
    default:
      throw new Error(`${path}: no generator for the type "${type}"; add one`);
  }
}

function integers(schema: Schema): fc.Arbitrary<number> {
  const min =
    typeof schema.exclusiveMinimum === 'number'
      ? Math.floor(schema.exclusiveMinimum) + 1
      : typeof schema.minimum === 'number'
        ? Math.ceil(schema.minimum)
        : Number.MIN_SAFE_INTEGER;
  const max =
    typeof schema.exclusiveMaximum === 'number'
      ? Math.ceil(schema.exclusiveMaximum) - 1
      : typeof schema.maximum === 'number'
        ? Math.floor(schema.maximum)
        : Number.MAX_SAFE_INTEGER;
  // fc.integer stays within 32 bits, and a rule may live anywhere in a wider range: draw from all of it, and its ends.
  return fc.oneof(fc.bigInt({ min: BigInt(min), max: BigInt(max) }).map(Number), fc.constantFrom(min, max));
}

function strings(schema: Schema): fc.Arbitrary<string> {
  const minLength = typeof schema.minLength === 'number' ? schema.minLength : 0;
  const maxLength = typeof schema.maxLength === 'number' ? schema.maxLength : undefined;
  // JSON Schema counts characters (code points), not UTF-16 code units: an emoji is one.
  const fits = (text: string) => {
    const length = [...text].length;
    return length >= minLength && (maxLength === undefined || length <= maxLength);
  };
  if (typeof schema.pattern === 'string') {
    // JSON Schema patterns are ECMA-262 with Unicode semantics (Ajv compiles them with `u`).
    const pattern = new RegExp(schema.pattern, 'u');
    return fc
      .oneof(fc.stringMatching(pattern), fc.stringMatching(pattern, { size: 'large' }))
      .filter(fits)
      .filter((text) => pattern.test(text));
  }
  // Without a bound, lengths well past any a handler might enforce (255, 1000) without saying so.
  // Two lone surrogates drawn side by side can make one pair, one character fewer: hence the filter.
  const longest = maxLength ?? 2000;
  return fc
    .oneof(
      fc.string({ unit: anyChar, minLength, maxLength: Math.min(longest, minLength + 20) }),
      fc.string({ unit: anyChar, minLength, maxLength: longest, size: 'max' }),
    )
    .filter(fits);
}

function arrays(schema: Schema, path: string): fc.Arbitrary<unknown[]> {
  if (typeof schema.items !== 'object' || schema.items === null) throw new Error(`${path}: an array needs its items`);
  const minLength = typeof schema.minItems === 'number' ? schema.minItems : 0;
  // Without a bound, lengths past any a handler might enforce without saying so.
  const maxLength = typeof schema.maxItems === 'number' ? schema.maxItems : minLength + 50;
  return fc.array(documentedValues(schema.items as Schema, `${path}/items`), { minLength, maxLength });
}

function objects(schema: Schema, path: string): fc.Arbitrary<Record<string, unknown>> {
  const properties = (schema.properties ?? {}) as Record<string, Schema>;
  const required = (schema.required ?? []) as string[];
  const known = fc.record(
    Object.fromEntries(
      Object.entries(properties).map(([name, property]) => [name, documentedValues(property, `${path}/${name}`)]),
    ),
    { requiredKeys: required },
  );
  if (schema.additionalProperties === false) return known;
  if (schema.additionalProperties !== undefined) {
    throw new Error(`${path}: no generator for additionalProperties other than false; add one`);
  }
  const extra = fc.dictionary(
    fc.string({ minLength: 1, maxLength: 8 }).filter((name) => !(name in properties)),
    fc.jsonValue({ maxDepth: 2 }),
    { maxKeys: 3 },
  );
  return fc.tuple(known, extra).map(([values, more]) => ({ ...more, ...values }));
}
