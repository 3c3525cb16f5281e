import { IdempotencyProblemType, idempotencyProblemOf, RetrySafeClient } from '../../src/client';
import { problemType, ProblemType as Slug } from '../../src/http/problem-types';
import { created, problem, readOrder, scriptedFetch } from './scripted-fetch';

describe('IdempotencyProblemType', () => {
  it("names the key's own problems from the HTTP adapter's one list, as the full type URI a response carries", () => {
    for (const [name, uri] of Object.entries(IdempotencyProblemType)) {
      expect(uri).toBe(problemType(Slug[name as keyof typeof Slug]));
    }
    expect(IdempotencyProblemType.requestInFlight).toBe('https://keystone-idempotency.dev/problems/request-in-flight');
  });

  it("knows nothing of any service's own problems", () => {
    expect(Object.keys(IdempotencyProblemType).sort()).toEqual([
      'idempotencyKeyInvalid',
      'idempotencyKeyMissing',
      'idempotencyKeyReused',
      'requestInFlight',
    ]);
  });
});

describe('idempotencyProblemOf', () => {
  it.each([
    'https://keystone-idempotency.dev/problems/',
    'https://api.example.com/problems/',
    'urn:example:problem:',
    'https://api.example.com/errors#',
  ])("recognises the key's problems under %s, whatever base the server sets", (base) => {
    for (const [name, uri] of Object.entries(IdempotencyProblemType)) {
      const slug = uri.slice('https://keystone-idempotency.dev/problems/'.length);
      expect(idempotencyProblemOf(`${base}${slug}`)).toBe(name);
    }
  });

  it('names no other problem, nor a slug that only ends like one', () => {
    expect(idempotencyProblemOf('https://api.example.com/problems/card-declined')).toBeUndefined();
    expect(idempotencyProblemOf('https://api.example.com/problems/not-request-in-flight')).toBeUndefined();
    expect(idempotencyProblemOf('about:blank')).toBeUndefined();
  });

  it("is the client's default in-flight rule: a 409 under another base is retried", async () => {
    const scripted = scriptedFetch([
      problem(409, 'https://api.example.com/problems/request-in-flight', { 'Retry-After': '0' }),
      created(),
    ]);
    const client = new RetrySafeClient({ baseUrl: 'http://127.0.0.1:3000', fetch: scripted.fetch, random: () => 0 });
    const result = await client.prepare({ url: 'orders', body: { sku: 'book-42' }, parse: readOrder }).send();
    expect(result.kind).toBe('success');
    expect(scripted.requests).toHaveLength(2);
  });
});
