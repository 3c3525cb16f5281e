import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { DEFAULT_TOLERANCE_SECONDS, signPayload, verifySignature } from '../../lib/webhooks/signature';

const secret = 'whsec_test_secret';
const rawBody = '{"id":"evt_1","type":"charge.succeeded"}';
const now = 1_700_000_000;

function hmac(body: string, key: string, timestamp: number): string {
  return createHmac('sha256', key).update(`${timestamp}.${body}`).digest('hex');
}

describe('signPayload', () => {
  it('produces t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">', () => {
    expect(signPayload(rawBody, secret, now)).toBe(`t=${now},v1=${hmac(rawBody, secret, now)}`);
  });

  it.each([-1, 1.5, Number.NaN])('refuses the timestamp %p', (timestamp) => {
    expect(() => signPayload(rawBody, secret, timestamp)).toThrow(RangeError);
  });
});

describe('verifySignature', () => {
  const verify = (header: string | undefined, overrides: Partial<Parameters<typeof verifySignature>[0]> = {}) =>
    verifySignature({ header, rawBody, secret, nowSeconds: now, ...overrides });

  it('accepts its own signature and returns the signed timestamp', () => {
    expect(verify(signPayload(rawBody, secret, now - 10))).toEqual({ ok: true, timestamp: now - 10 });
  });

  it.each([undefined, '', '   '])('reports a missing header for %p', (header) => {
    expect(verify(header)).toEqual({ ok: false, reason: 'missing' });
  });

  const v1 = hmac(rawBody, secret, now);
  it.each([
    ['no timestamp', `v1=${v1}`],
    ['no v1 entry', `t=${now}`],
    ['only another scheme', `t=${now},v0=${v1}`],
    ['a non-numeric timestamp', `t=soon,v1=${v1}`],
    ['a negative timestamp', `t=-${now},v1=${v1}`],
    ['two timestamps', `t=${now},t=${now},v1=${v1}`],
    ['a v1 that is not 64 hex digits', `t=${now},v1=${v1.slice(1)}`],
    ['a v1 with non-hex characters', `t=${now},v1=${'z'.repeat(64)}`],
    ['an entry without "="', `t=${now},v1`],
    ['free text', 'hello'],
  ])('reports a malformed header with %s', (_case, header) => {
    expect(verify(header)).toEqual({ ok: false, reason: 'malformed' });
  });

  it('reports a mismatch for another secret', () => {
    expect(verify(signPayload(rawBody, 'whsec_other', now))).toEqual({ ok: false, reason: 'mismatch' });
  });

  it('reports a mismatch for a body changed by one character', () => {
    expect(verify(signPayload(rawBody, secret, now), { rawBody: `${rawBody} ` })).toEqual({
      ok: false,
      reason: 'mismatch',
    });
  });

  it('reports a mismatch, not staleness, for a forged header with an old timestamp', () => {
    expect(verify(`t=${now - 3600},v1=${'0'.repeat(64)}`)).toEqual({ ok: false, reason: 'mismatch' });
  });

  it('accepts any matching v1 entry, so a sender can sign with an old and a new secret during rotation', () => {
    const header = `t=${now},v1=${hmac(rawBody, 'whsec_old', now)},v1=${hmac(rawBody, secret, now)}`;
    expect(verify(header)).toEqual({ ok: true, timestamp: now });
  });

  it('ignores entries of other schemes and surrounding spaces', () => {
    expect(verify(` t=${now} , v0=abc , v1=${v1.toUpperCase()} `)).toEqual({ ok: true, timestamp: now });
  });

  it.each([
    ['in the past', now - DEFAULT_TOLERANCE_SECONDS - 1],
    ['in the future', now + DEFAULT_TOLERANCE_SECONDS + 1],
  ])('reports a genuine signature with a timestamp beyond the tolerance %s as stale', (_case, timestamp) => {
    expect(verify(signPayload(rawBody, secret, timestamp))).toEqual({ ok: false, reason: 'stale' });
  });

  it('accepts a timestamp exactly at the tolerance, in either direction', () => {
    for (const timestamp of [now - DEFAULT_TOLERANCE_SECONDS, now + DEFAULT_TOLERANCE_SECONDS]) {
      expect(verify(signPayload(rawBody, secret, timestamp))).toEqual({ ok: true, timestamp });
    }
  });

  it('honours a custom tolerance', () => {
    const header = signPayload(rawBody, secret, now - 30);
    expect(verify(header, { toleranceSeconds: 29 })).toEqual({ ok: false, reason: 'stale' });
    expect(verify(header, { toleranceSeconds: 30 })).toEqual({ ok: true, timestamp: now - 30 });
  });

  describe('properties', () => {
    const timestamp = fc.integer({ min: 0, max: 4_102_444_800 });
    // HMAC pads short keys with zero bytes, so 'k' and 'k\0' are the same key: keep NUL out of generated secrets.
    const key = fc.string({ minLength: 1, unit: 'grapheme' }).filter((candidate) => !candidate.includes('\0'));
    const body = fc.string({ unit: 'grapheme' });

    it('verifies whatever it signed', () => {
      fc.assert(
        fc.property(body, key, timestamp, (payload, signingKey, t) => {
          const header = signPayload(payload, signingKey, t);
          expect(verifySignature({ header, rawBody: payload, secret: signingKey, nowSeconds: t })).toEqual({
            ok: true,
            timestamp: t,
          });
        }),
      );
    });

    it('refuses a signature once the body changes', () => {
      fc.assert(
        fc.property(body, body, key, timestamp, (signed, received, signingKey, t) => {
          fc.pre(signed !== received);
          const header = signPayload(signed, signingKey, t);
          const result = verifySignature({ header, rawBody: received, secret: signingKey, nowSeconds: t });
          expect(result).toEqual({ ok: false, reason: 'mismatch' });
        }),
      );
    });

    it('refuses a signature once the timestamp in the header changes', () => {
      fc.assert(
        fc.property(body, key, timestamp, timestamp, (payload, signingKey, signedAt, claimed) => {
          fc.pre(signedAt !== claimed);
          const header = signPayload(payload, signingKey, signedAt).replace(/^t=\d+/, `t=${claimed}`);
          const result = verifySignature({ header, rawBody: payload, secret: signingKey, nowSeconds: claimed });
          expect(result).toEqual({ ok: false, reason: 'mismatch' });
        }),
      );
    });

    it('refuses a signature made with another secret', () => {
      fc.assert(
        fc.property(body, key, key, timestamp, (payload, signingKey, verifyingKey, t) => {
          fc.pre(signingKey !== verifyingKey);
          const header = signPayload(payload, signingKey, t);
          const result = verifySignature({ header, rawBody: payload, secret: verifyingKey, nowSeconds: t });
          expect(result).toEqual({ ok: false, reason: 'mismatch' });
        }),
      );
    });
  });
});
