import { usableRetryAfter } from '../../src/client/attempt-log';

describe('usableRetryAfter', () => {
  it('keeps delay-seconds and an HTTP-date, the two forms RFC 9110 allows', () => {
    expect(usableRetryAfter('1')).toBe('1');
    expect(usableRetryAfter(' 120 ')).toBe('120');
    expect(usableRetryAfter('Wed, 21 Oct 2026 07:28:00 GMT')).toBe('Wed, 21 Oct 2026 07:28:00 GMT');
  });

  it.each([['soon'], ['-1'], ['1.5'], [''], ['Wed, 99 Foo 2026']])('drops %j', (value) => {
    expect(usableRetryAfter(value)).toBeNull();
  });

  it('has nothing to keep when there is no header', () => {
    expect(usableRetryAfter(null)).toBeNull();
  });
});
