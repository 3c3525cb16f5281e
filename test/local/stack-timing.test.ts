import { silentLog } from '@keystone-idempotency/local-aws/log';
import { localTimings, startLocalStack } from '../../lib/local/stack';
import { callChainViolations, timingViolations } from '../../lib/timing/timing';

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

  it("starts with its defaults: they satisfy the shared rules, an order's calls one after another included", () => {
    expect(timingViolations(localTimings({}))).toEqual([]);
    expect(callChainViolations(localTimings({}))).toEqual([]);
  });

  it("warns of functions an order's calls can outlast, and goes on starting", async () => {
    const logged: string[] = [];
    const log = { ...silentLog, error: (message: string) => logged.push(message) };
    const env = {
      IDEMPOTENCY_LEASE_SECONDS: '4',
      API_FUNCTION_TIMEOUT_MS: '3000',
      CONSUMER_FUNCTION_TIMEOUT_MS: '3000',
      PROCESSOR_TIMEOUT_MS: '1500',
      MAILER_TIMEOUT_MS: '1000',
      COMPLETER_INTERVAL_SECONDS: '1',
    };
    // An unknown store stops the start just after the timing check, before anything is started.
    await expect(startLocalStack({ env: { ...env, STORE: 'nowhere' }, log })).rejects.toThrow(/STORE must be one of/);
    expect(logged).toEqual([
      expect.stringMatching(/^timeouts a deployment refuses: OrdersCreate's outside calls one after another/),
      expect.stringMatching(/^timeouts a deployment refuses: PaymentsCompleter's outside calls one after another/),
    ]);
  });
});
