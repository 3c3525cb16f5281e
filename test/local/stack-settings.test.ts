import { THROTTLED_INTEGRATION } from '../../lib/infra/throttling';
import {
  LOCAL_CONCURRENCY,
  SOURCE_DEFAULTS,
  type StackSettings,
  stackSettings,
  timingsOf,
} from '../../lib/local/stack-settings';
import { callChainViolations, timingViolations } from '../../lib/timing/timing';

/** The dev template's values, as deployedSettings reads them (test/bundled checks it against a real synth). */
const TEMPLATE: StackSettings = {
  leaseSeconds: 90,
  ttlSeconds: 86_400,
  processorTimeoutMs: 8_000,
  warehouseTimeoutMs: 5_000,
  mailerTimeoutMs: 5_000,
  timeoutsMs: {
    PaymentsCreate: 12_000,
    PaymentsGet: 12_000,
    OrdersCreate: 28_000,
    OrdersGet: 12_000,
    InventoryGet: 12_000,
    Authorizer: 5_000,
    WebhookReceiver: 12_000,
    SettlementConsumer: 30_000,
    PaymentsCompleter: 60_000,
  },
  integrationTimeoutMs: 10_000,
  authorizerResultTtlSeconds: 0,
  settlement: { visibilitySeconds: 180, maxReceiveCount: 5, batchSize: 10, concurrency: 2 },
  completerIntervalSeconds: 60,
  concurrency: { unreserved: LOCAL_CONCURRENCY, reserved: { Authorizer: 50 } },
  throttledResponse: THROTTLED_INTEGRATION,
};

describe('stackSettings', () => {
  it("takes the template's values as they are when nothing is set", () => {
    expect(stackSettings({}, TEMPLATE)).toEqual(TEMPLATE);
    expect(timingViolations(timingsOf(TEMPLATE))).toEqual([]);
    expect(callChainViolations(timingsOf(TEMPLATE))).toEqual([]);
  });

  it("lets the local settings replace the template's, for a test that can't wait out a 90 s lease", () => {
    const fast = stackSettings(
      {
        IDEMPOTENCY_LEASE_SECONDS: '4',
        API_FUNCTION_TIMEOUT_MS: '3000',
        CONSUMER_FUNCTION_TIMEOUT_MS: '3000',
        PROCESSOR_TIMEOUT_MS: '2000',
        WAREHOUSE_TIMEOUT_MS: '1500',
        MAILER_TIMEOUT_MS: '1000',
        COMPLETER_INTERVAL_SECONDS: '1',
      },
      TEMPLATE,
    );
    expect(fast).toEqual({
      ...TEMPLATE,
      leaseSeconds: 4,
      processorTimeoutMs: 2_000,
      warehouseTimeoutMs: 1_500,
      mailerTimeoutMs: 1_000,
      timeoutsMs: {
        PaymentsCreate: 3_000,
        PaymentsGet: 3_000,
        OrdersCreate: 3_000,
        OrdersGet: 3_000,
        InventoryGet: 3_000,
        Authorizer: 3_000,
        WebhookReceiver: 3_000,
        SettlementConsumer: 3_000,
        PaymentsCompleter: 3_000,
      },
      // Kept under the API functions' timeout, as the local stack always has it.
      integrationTimeoutMs: 2_500,
      completerIntervalSeconds: 1,
    });
    expect(timingViolations(timingsOf(fast))).toEqual([]);
    // An order's calls (2 + 1.5 + 1 + 2 s) don't fit in 3 s: the local stack starts, and warns of it.
    expect(callChainViolations(timingsOf(fast))).toEqual([
      "OrdersCreate's outside calls one after another (processor 2s + warehouse 1500ms + mailer 1s + processor 2s = " +
        "6500ms) plus 500ms for its store's writes must fit in its timeout (3s)",
      "PaymentsCompleter's outside calls one after another (processor 2s + warehouse 1500ms + mailer 1s + processor " +
        "2s = 6500ms) plus 500ms for its store's writes must fit in its timeout (3s)",
    ]);
  });

  it('keeps the consumer within the visibility timeout', () => {
    const settings = stackSettings({ SETTLEMENT_VISIBILITY_SECONDS: '20' }, TEMPLATE);
    expect(settings.timeoutsMs.SettlementConsumer).toBe(20_000);
  });

  it("starts from the local stack's own defaults for the functions run from source", () => {
    expect(stackSettings({})).toEqual(SOURCE_DEFAULTS);
    expect(timingViolations(timingsOf(SOURCE_DEFAULTS))).toEqual([]);
    expect(callChainViolations(timingsOf(SOURCE_DEFAULTS))).toEqual([]);
  });

  it('caps every function the definitions reserve nothing for at LOCAL_FUNCTION_CONCURRENCY, and no other', () => {
    expect(stackSettings({ LOCAL_FUNCTION_CONCURRENCY: '4' }, TEMPLATE).concurrency).toEqual({
      unreserved: 4,
      reserved: { Authorizer: 50 },
    });
    expect(SOURCE_DEFAULTS.concurrency).toEqual({ unreserved: LOCAL_CONCURRENCY, reserved: {} });
    // Fifty concurrent requests must never be throttled by the local default.
    expect(LOCAL_CONCURRENCY).toBeGreaterThanOrEqual(50);
  });

  it('refuses a concurrency that is not a whole number of at least one', () => {
    for (const value of ['0', '-4', '2.5', 'many']) {
      expect(() => stackSettings({ LOCAL_FUNCTION_CONCURRENCY: value })).toThrow(/LOCAL_FUNCTION_CONCURRENCY must be/);
    }
  });

  it('answers a throttled invocation through the REST API as the deployed gateway response maps it', () => {
    expect(SOURCE_DEFAULTS.throttledResponse).toEqual(THROTTLED_INTEGRATION);
    expect(THROTTLED_INTEGRATION).toMatchObject({ statusCode: 429, headers: { 'Retry-After': '1' } });
  });

  it('refuses a setting that is not a positive number', () => {
    expect(() => stackSettings({ IDEMPOTENCY_LEASE_SECONDS: 'soon' }, TEMPLATE)).toThrow(
      'environment variable IDEMPOTENCY_LEASE_SECONDS must be a positive number, got "soon"',
    );
  });
});
