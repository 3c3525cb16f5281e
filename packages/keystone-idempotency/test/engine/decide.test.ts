import { decide } from '../../src/engine/decide';
import { type IdempotencyRecord, RecordStatus } from '../../src/engine/record';

const now = 1_800_000_000_000;
const record = (overrides: Partial<IdempotencyRecord> = {}): IdempotencyRecord => ({
  key: 'acct|POST%20%2Fx|k',
  status: RecordStatus.InProgress,
  fingerprint: 'fp',
  leaseToken: 'token',
  leaseExpiresAt: now + 30_000,
  expiresAt: now / 1000 + 3600,
  downstreamKey: 'idk_1',
  attempt: 1,
  createdAt: now - 1000,
  ...overrides,
});
const response = { statusCode: 201, body: '{}', headers: {} };

describe('decide', () => {
  it('proceeds when there is no record', () => {
    expect(decide(undefined, 'fp', now).kind).toBe('fresh');
  });

  it('treats a record past its expiry as absent, whatever its state or body', () => {
    const expired = record({ expiresAt: now / 1000, status: RecordStatus.Completed, response, fingerprint: 'other' });
    expect(decide(expired, 'fp', now).kind).toBe('fresh');
  });

  it('never treats an unfinished recoverable operation as expired: it is taken over, under its downstream key', () => {
    const { expiresAt: _none, ...inRecovery } = record({ status: RecordStatus.Released, recoverAt: now - 1 });
    expect(decide(inRecovery, 'fp', now + 10 * 86_400_000).kind).toBe('takeover');
    // Written before the rule, with an expiry long past: the recovery index still says it is unfinished.
    const legacy = record({ status: RecordStatus.Released, recoverAt: now - 1, expiresAt: now / 1000 - 3600 });
    expect(decide(legacy, 'fp', now)).toMatchObject({ kind: 'takeover', record: { downstreamKey: 'idk_1' } });
    expect(decide(legacy, 'another body', now).kind).toBe('mismatch');
  });

  it('reports a mismatch for a live record made from another body, before anything else', () => {
    expect(decide(record({ fingerprint: 'other' }), 'fp', now).kind).toBe('mismatch');
    expect(decide(record({ fingerprint: 'other', status: RecordStatus.Completed, response }), 'fp', now).kind).toBe(
      'mismatch',
    );
  });

  it('replays a completed record', () => {
    expect(decide(record({ status: RecordStatus.Completed, response }), 'fp', now)).toMatchObject({
      kind: 'replay',
      response,
    });
  });

  it('refuses a completed record without a response rather than running the work again', () => {
    expect(() => decide(record({ status: RecordStatus.Completed }), 'fp', now)).toThrow(/no response/);
  });

  it('reports a live lease as in flight with a short suggested delay', () => {
    expect(decide(record(), 'fp', now)).toMatchObject({ kind: 'in_flight', retryAfterMs: 1000 });
    expect(decide(record({ leaseExpiresAt: now + 200 }), 'fp', now)).toMatchObject({ retryAfterMs: 200 });
  });

  it('takes over a lease that ran out, at the instant it runs out', () => {
    expect(decide(record({ leaseExpiresAt: now }), 'fp', now).kind).toBe('takeover');
  });

  it('takes over a released record', () => {
    expect(decide(record({ status: RecordStatus.Released, leaseExpiresAt: now - 1 }), 'fp', now).kind).toBe('takeover');
  });
});
