import { silentLog } from '@keystone-idempotency/local-aws/log';
import { localTimings, startLocalStack } from '../../lib/local/stack';
import { timingViolations } from '../../lib/timing/timing';

describe('the local stack', () => {
  it('refuses, before starting anything, the timings the deployed stack refuses', async () => {
    const env = { IDEMPOTENCY_TTL_SECONDS: '3', IDEMPOTENCY_LEASE_SECONDS: '2', PROCESSOR_TIMEOUT_MS: '5000' };
    // No DynamoDB endpoint: had it got past the check, it would have started a JVM (and the test would hang on it).
    await expect(startLocalStack({ env: { ...env, DYNAMODB_ENDPOINT: '' }, log: silentLog })).rejects.toThrow(
      /The local stack's timeouts are inconsistent:\n {2}- the completer's period \(10s\) must be shorter than the lease \(2s\)/,
    );
  });

  it("refuses a settlement receive count that would send a live owner's event to the DLQ", async () => {
    // The setting: 3 was accepted, and settlement's waits (1 s, 2 s, the rest of the lease) outlived it.
    await expect(
      startLocalStack({ env: { SETTLEMENT_MAX_RECEIVE_COUNT: '3', DYNAMODB_ENDPOINT: '' }, log: silentLog }),
    ).rejects.toThrow(/- the settlement queue's receive count \(3\) must be at least 4/);
  });

  it('starts with its defaults: they satisfy the shared rules', () => {
    expect(timingViolations(localTimings({}))).toEqual([]);
  });
});
