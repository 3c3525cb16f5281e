import { ProblemType } from '../../lib/client';
import { problemType, ProblemType as ServerProblemType } from '../../lib/http/problem';

describe('ProblemType', () => {
  it("names the problems exactly as the server's HTTP adapter does", () => {
    expect(ProblemType.invalidBody).toBe(problemType(ServerProblemType.invalidBody));
    expect(ProblemType.idempotencyKeyMissing).toBe(problemType(ServerProblemType.idempotencyKeyMissing));
    expect(ProblemType.idempotencyKeyInvalid).toBe(problemType(ServerProblemType.idempotencyKeyInvalid));
    expect(ProblemType.requestInFlight).toBe(problemType(ServerProblemType.requestInFlight));
    expect(ProblemType.idempotencyKeyReused).toBe(problemType(ServerProblemType.idempotencyKeyReused));
  });

  // card-declined and processor-unavailable are written by the payments handler: test/e2e/client.test.ts sees them.
});
