import { ProblemType } from '../../lib/client';
import { problemType, ProblemType as Slug } from '../../lib/http/problem-types';

describe('ProblemType', () => {
  it('names every problem in the one list, as the full type URI a response carries', () => {
    expect(Object.keys(ProblemType)).toEqual(Object.keys(Slug));
    for (const [name, slug] of Object.entries(Slug)) {
      expect(ProblemType[name as keyof typeof ProblemType]).toBe(problemType(slug));
    }
  });

  it("includes the payments service's own problems, which the client switches on", () => {
    expect(ProblemType.cardDeclined).toBe('https://keystone-idempotency.dev/problems/card-declined');
    expect(ProblemType.processorUnavailable).toBe('https://keystone-idempotency.dev/problems/processor-unavailable');
    expect(ProblemType.requestInFlight).toBe('https://keystone-idempotency.dev/problems/request-in-flight');
  });
});
