import { createConfig, lintFromString } from '@redocly/openapi-core';
import Ajv2020 from 'ajv/dist/2020';
import fc from 'fast-check';
import { parseIdempotencyKey } from '../../lib/engine/key';
import { ProblemType, problemType } from '../../lib/http/problem';
import { STAGE_NAME } from '../../lib/infra/api';
import { openApiDocument } from '../../lib/openapi/document';
import { IDEMPOTENCY_KEY_PATTERN } from '../../lib/openapi/idempotency-key';
import { PaymentRequest } from '../../lib/payments/schema';
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

  it('lists every problem type the service can answer', () => {
    // The one list holds the adapter's, the payments service's and the webhook receiver's types. `bad-request` is
    // the HTTP adapter's generic type; no route of the payments API produces it.
    const served = Object.values(ProblemType).filter((slug) => slug !== ProblemType.badRequest);
    expect(served).toEqual(expect.arrayContaining(['card-declined', 'processor-unavailable', 'invalid-signature']));
    for (const slug of served) expect(text).toContain(JSON.stringify(problemType(slug)));
  });

  it("names the deployed stage's URL", () => {
    expect(document.servers?.at(-1)?.url).toMatch(new RegExp(`/${STAGE_NAME}$`));
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
