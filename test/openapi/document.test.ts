import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import Ajv2020 from 'ajv/dist/2020';
import fc from 'fast-check';
import { parseIdempotencyKey } from 'keystone-idempotency/engine';
import { ProblemType, problemType } from 'keystone-idempotency/http';
import type { OpenAPIObject, OperationObject, ReferenceObject, RequestBodyObject } from 'openapi3-ts/oas31';
import { en } from 'zod/locales';
import { type $ZodType, safeParse } from 'zod/v4/core';
import { STAGE_NAME } from '../../lib/infra/api';
import { openApiDocument } from '../../lib/openapi/document';
import { IDEMPOTENCY_KEY_PATTERN } from '../../lib/openapi/idempotency-key';
import { MAX_LINE_QUANTITY, MERGED_QUANTITY_RULE, mergeLines, OrderRequest } from '../../lib/orders/schema';
import { PaymentProblemType, PROBLEM_TYPE_BASE } from '../../lib/payments/problems';
import { PaymentRequest } from '../../lib/payments/schema';
import { ChargeSucceededEvent } from '../../lib/settlement/event';
import { documentedValues } from '../support/json-schema-arbitrary';
import { OpenApiContract } from '../support/openapi-contract';

const document = openApiDocument({ serverUrl: 'http://127.0.0.1:3000' });
const text = JSON.stringify(document);

describe('the OpenAPI document', () => {
  it("passes Redocly's strict recommended rules without a single problem", async () => {
    const config = await createConfig({ extends: ['recommended-strict'] });
    const problems = await lintFromString({ source: text, absoluteRef: 'openapi.json', config });
    const described = problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`);
    expect(described).toEqual([]);
  });

  it('is OpenAPI 3.1, and every schema in it is valid JSON Schema 2020-12', () => {
    expect(document.openapi).toMatch(/^3\.1\./);
    const compiled = new OpenApiContract(document).compileAll();
    expect(compiled.length).toBeGreaterThan(30);
  });

  it("lists every problem type the service can answer, the adapter's and its own, under its base", () => {
    // Two owners, one list each: the HTTP adapter's (every one of which some route of this API can answer) and the
    // service's (the payments API's and the webhook receiver's).
    const served = [...Object.values(ProblemType), ...Object.values(PaymentProblemType)];
    expect(served).toEqual(expect.arrayContaining(['request-in-flight', 'card-declined', 'invalid-signature']));
    for (const slug of served) expect(text).toContain(JSON.stringify(problemType(slug, PROBLEM_TYPE_BASE)));
    // And nothing else: every `type` the document names is one of those, under the service's base.
    const named = [...text.matchAll(/"(https:\/\/[^"]*\/problems\/[^"]*)"/g)].map(([, uri]) => uri);
    expect(new Set(named)).toEqual(new Set(served.map((slug) => problemType(slug, PROBLEM_TYPE_BASE))));
  });

  it("names the deployed stage's URL", () => {
    expect(document.servers?.at(-1)?.url).toMatch(new RegExp(`/${STAGE_NAME}$`));
  });

  it('printed by `npm run openapi`, describes the server API_URL names as that, not as the local stack', async () => {
    const [given, unset] = await Promise.all([
      printedDocument({ API_URL: 'https://payments.example.test/prod' }),
      printedDocument({ API_URL: undefined }),
    ]);
    expect(given.servers?.[0]?.url).toBe('https://payments.example.test/prod');
    expect(given.servers?.[0]?.description).toContain('API_URL');
    expect(given.servers?.[0]?.description).not.toMatch(/local stack|npm start/);
    // Without it, the first server is the local stack on its default port, and says so.
    expect(unset.servers?.[0]).toEqual({
      url: 'http://127.0.0.1:3000',
      description: expect.stringMatching(/local stack \(npm start\) on its default port/),
    });
  });

  it('never documents a valid payment request as invalid', () => {
    const ajv = new Ajv2020({ strict: true });
    const validate = ajv.compile(document.components?.schemas?.PaymentRequest ?? false);
    const field = fc.oneof(fc.integer(), fc.double(), fc.string(), fc.constantFrom('usd', 'eur', 'jpy', 'USD', ''));
    fc.assert(
      fc.property(
        fc.record(
          { amount: field, currency: field, source: field, description: field, tip: field },
          { requiredKeys: [] },
        ),
        (body) => {
          if (PaymentRequest.safeParse(body).success) expect(validate(body)).toBe(true);
        },
      ),
      { numRuns: 2000 },
    );
  });
});

/**
 * What each operation's handler checks of its JSON body before it acts, as the problems it would answer with (none:
 * it goes ahead). An operation with a body and no entry here fails the test below, which is the point: its rules
 * must be written down before the document can be checked against them.
 */
const ENFORCED: Record<string, (body: unknown) => string[]> = {
  createPayment: (body) => schemaProblems(PaymentRequest, body),
  createOrder: (body) => schemaProblems(OrderRequest, body),
  // The event's schema, then its id as the idempotency key (httpIdempotency parses it after validation).
  receiveProcessorWebhook: (body) => {
    const parsed = ChargeSucceededEvent.safeParse(body);
    if (!parsed.success) return schemaProblems(ChargeSucceededEvent, body);
    try {
      parseIdempotencyKey(parsed.data.id);
      return [];
    } catch (error) {
      return [`id as the idempotency key: ${(error as Error).message}`];
    }
  },
};

/**
 * Rules JSON Schema can't state, which the document states in words (a schema's `description`) instead: a drawn body
 * that breaks one is left out of the check below, and each one's words must be in the document.
 */
const STATED_IN_WORDS: Record<
  string,
  readonly { readonly words: string; readonly holds: (body: unknown) => boolean }[]
> = {
  createOrder: [
    {
      words: MERGED_QUANTITY_RULE,
      holds: (body) => mergeLines((body as OrderRequest).items).every((line) => line.quantity <= MAX_LINE_QUANTITY),
    },
  ],
};

function schemaProblems(schema: $ZodType, body: unknown): string[] {
  const result = safeParse(schema, body, { error: en().localeError });
  return result.success ? [] : result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
}

/** Each operation that takes a JSON body, with the body's schema as the document states it ($ref resolved). */
function documentedBodies(doc: OpenAPIObject): { operationId: string; schema: Record<string, unknown> }[] {
  const resolve = (ref: ReferenceObject) =>
    ref.$ref
      .replace(/^#\//, '')
      .split('/')
      .reduce<unknown>((node, key) => (node as Record<string, unknown>)[key], doc);
  return Object.values(doc.paths ?? {}).flatMap((item) =>
    Object.values(item as Record<string, OperationObject>).flatMap((operation) => {
      const body = operation.requestBody as RequestBodyObject | undefined;
      const schema = body?.content['application/json']?.schema;
      if (!schema) return [];
      const resolved = ('$ref' in schema ? resolve(schema as ReferenceObject) : schema) as Record<string, unknown>;
      return [{ operationId: operation.operationId ?? '(no operationId)', schema: resolved }];
    }),
  );
}

describe('the documented request bodies', () => {
  const bodies = documentedBodies(document);

  it('are each checked against what their handler enforces', () => {
    expect(bodies.map((b) => b.operationId).sort()).toEqual(Object.keys(ENFORCED).sort());
  });

  // The other direction of 'never documents a valid payment request as invalid': a check the handler applies and the
  // document does not state (a refinement, a length, a key rule applied after validation) turns some body the
  // document calls valid into a 400, and the bodies drawn here reach the edges where such rules live.
  it.each(bodies)('$operationId accepts every body the document says is valid', ({ operationId, schema }) => {
    const validate = new Ajv2020({ strict: true }).compile(schema);
    const enforced = ENFORCED[operationId] ?? (() => ['no rules written down for this operation']);
    const inWords = STATED_IN_WORDS[operationId] ?? [];
    for (const { words } of inWords) expect(JSON.stringify(schema)).toContain(JSON.stringify(words).slice(1, -1));
    fc.assert(
      fc.property(documentedValues(schema), (body) => {
        expect(validate(body)).toBe(true);
        fc.pre(inWords.every((rule) => rule.holds(body)));
        expect(enforced(body)).toEqual([]);
      }),
      // Shrinking a body of long strings takes minutes; the problems the handler names say what is undocumented.
      { numRuns: 500, endOnFailure: true },
    );
  });
});

describe('the documented Idempotency-Key pattern', () => {
  const pattern = new RegExp(IDEMPOTENCY_KEY_PATTERN, 'u');
  const parses = (value: string) => {
    try {
      parseIdempotencyKey(value);
      return true;
    } catch {
      return false;
    }
  };
  /** Keys near every rule's edge: quotes, escapes, spaces, non-ASCII, and lengths around 255. */
  const keyLike = fc.oneof(
    fc.string({ unit: fc.constantFrom('a', 'Z', '-', '"', '\\', ' ', '~', '\u00e9', '\t'), maxLength: 12 }),
    fc.string({ unit: fc.constantFrom('a', ' ', '"', '\\', '\u00e9'), maxLength: 12 }).map((inner) => `"${inner}"`),
    fc.integer({ min: 250, max: 260 }).map((n) => 'k'.repeat(n)),
    fc.integer({ min: 250, max: 260 }).map((n) => `"${'\\"'.repeat(n)}"`),
    fc.integer({ min: 250, max: 260 }).map((n) => `"${'a b'.repeat(Math.ceil(n / 3)).slice(0, n)}"`),
    fc.string({ unit: 'binary-ascii', maxLength: 20 }),
  );

  it('accepts exactly the header values the handler accepts', () => {
    fc.assert(
      fc.property(
        // HTTP strips whitespace around a field value before the handler sees it.
        keyLike.filter((value) => value === value.trim()),
        (value) => {
          expect(pattern.test(value)).toBe(parses(value));
        },
      ),
      { numRuns: 5000 },
    );
  });
});

/** What `npm run openapi` prints (bin/openapi.ts, run as the script runs it), with these variables set or unset. */
async function printedDocument(variables: Record<string, string | undefined>): Promise<OpenAPIObject> {
  const root = join(__dirname, '..', '..');
  const env = { ...process.env, ...variables };
  for (const [name, value] of Object.entries(variables)) if (value === undefined) delete env[name];
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      join(root, 'node_modules', 'tsx', 'dist', 'cli.mjs'),
      '--conditions=keystone-source',
      join(root, 'bin', 'openapi.ts'),
    ],
    { cwd: root, env, maxBuffer: 16 * 1024 * 1024 },
  );
  return JSON.parse(stdout) as OpenAPIObject;
}
