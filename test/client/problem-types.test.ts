import { IdempotencyProblemType } from '../../lib/client';
import { problemType, ProblemType as Slug } from '../../lib/http/problem-types';

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
