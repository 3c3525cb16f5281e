import fc from 'fast-check';
import {
  backoffCeilingMs,
  checkRetryPolicy,
  DEFAULT_RETRY_POLICY,
  fullJitter,
  isRetryStatus,
  retryAfterMs,
} from '../../src/client/retry-policy';

describe('isRetryStatus', () => {
  it('retries in-flight duplicates, throttling and processor outages', () => {
    expect([409, 429, 502, 503, 504].every(isRetryStatus)).toBe(true);
  });

  it('never retries an answer that is final for the key', () => {
    expect([200, 201, 400, 401, 402, 403, 404, 422, 500].some(isRetryStatus)).toBe(false);
  });
});

describe('backoffCeilingMs', () => {
  it('doubles from the base delay for each retry, up to the cap', () => {
    const policy = { baseDelayMs: 250, maxDelayMs: 1500 };
    expect([1, 2, 3, 4, 5, 60].map((retry) => backoffCeilingMs(retry, policy))).toEqual([
      250, 500, 1000, 1500, 1500, 1500,
    ]);
  });
});

describe('fullJitter', () => {
  it('waits between 0 and the capped ceiling, whatever the retry and the draw', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        fc.integer({ min: 0, max: 10_000 }),
        fc.integer({ min: 0, max: 60_000 }),
        (retry, draw, baseDelayMs, maxDelayMs) => {
          const ceiling = backoffCeilingMs(retry, { baseDelayMs, maxDelayMs });
          const wait = fullJitter(ceiling, () => draw);
          expect(ceiling).toBeLessThanOrEqual(maxDelayMs);
          expect(wait).toBeGreaterThanOrEqual(0);
          expect(wait).toBeLessThanOrEqual(ceiling);
          if (ceiling > 0) expect(wait).toBeLessThan(ceiling);
        },
      ),
    );
  });

  it('spreads clients that failed together across the whole window, not around its end', () => {
    const draws = [0, 0.25, 0.5, 0.75, 0.9999];
    expect(draws.map((draw) => Math.round(fullJitter(1000, () => draw)))).toEqual([0, 250, 500, 750, 1000]);
  });
});

describe('checkRetryPolicy', () => {
  it('accepts the defaults', () => {
    expect(checkRetryPolicy(DEFAULT_RETRY_POLICY)).toBe(DEFAULT_RETRY_POLICY);
  });

  it.each([
    ['no attempt at all', { maxAttempts: 0 }],
    ['a fraction of an attempt', { maxAttempts: 2.5 }],
    ['a negative delay', { baseDelayMs: -1 }],
    ['an infinite deadline', { deadlineMs: Number.POSITIVE_INFINITY }],
    ['a timeout longer than a timer can wait', { attemptTimeoutMs: 2 ** 31 }],
  ])('refuses %s', (_name, override) => {
    expect(() => checkRetryPolicy({ ...DEFAULT_RETRY_POLICY, ...override })).toThrow(RangeError);
  });
});

describe('retryAfterMs', () => {
  const now = Date.UTC(2026, 0, 1, 12, 0, 0);

  it('reads delay-seconds as seconds, however large: 1750000000 is about 55 years, not a date', () => {
    expect(retryAfterMs('2', now)).toBe(2000);
    expect(retryAfterMs(' 0 ', now)).toBe(0);
    expect(retryAfterMs('1750000000', now)).toBe(1_750_000_000_000);
  });

  it('reads an HTTP-date as the time until then, and a date already past as no wait', () => {
    expect(retryAfterMs(new Date(now + 3000).toUTCString(), now)).toBe(3000);
    expect(retryAfterMs(new Date(now - 60_000).toUTCString(), now)).toBe(0);
  });
});
