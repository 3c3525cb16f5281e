import { App } from 'aws-cdk-lib';
import { ENVIRONMENT_NAMES, type EnvironmentConfig, environments } from '../../lib/infra/environments';
import { serviceFunctions } from '../../lib/infra/functions';
import { PaymentsStack } from '../../lib/infra/payments-stack';
import {
  assertTiming,
  functionTimeoutSeconds,
  settlementVisibilityTimeoutSeconds,
  timingViolations,
} from '../../lib/infra/timing';

/** prod with some timings changed. */
function prodWith(change: {
  idempotency?: Partial<EnvironmentConfig['idempotency']>;
  timeouts?: Partial<EnvironmentConfig['timeouts']>;
}): EnvironmentConfig {
  const prod = environments.prod;
  return {
    ...prod,
    idempotency: { ...prod.idempotency, ...change.idempotency },
    timeouts: { ...prod.timeouts, ...change.timeouts },
  };
}

describe('timingViolations', () => {
  it.each(ENVIRONMENT_NAMES)('finds none in %s', (name) => {
    expect(timingViolations(environments[name], serviceFunctions)).toEqual([]);
  });

  it('rejects a lease that a function can outlive', () => {
    const violations = timingViolations(prodWith({ timeouts: { queueConsumerSeconds: 90 } }), serviceFunctions);
    expect(violations).toContain(
      "lease (90s) must be at least SettlementConsumer's timeout (90s) plus the engine's 1s margin for clock skew",
    );
  });

  it('rejects a completer that comes around less often than the lease', () => {
    const violations = timingViolations(prodWith({ idempotency: { recoveryPeriodMinutes: 2 } }), serviceFunctions);
    expect(violations).toEqual([
      "the completer's period (120s) must be shorter than the lease (90s): an operation whose client never came " +
        'back would wait more than twice the lease for recovery',
    ]);
  });

  it('rejects an API function that API Gateway outwaits', () => {
    const violations = timingViolations(prodWith({ timeouts: { apiIntegrationSeconds: 12 } }), serviceFunctions);
    expect(violations).toEqual([
      "PaymentsCreate's timeout (12s) must be longer than the API integration timeout (12s)",
      "PaymentsGet's timeout (12s) must be longer than the API integration timeout (12s)",
      "WebhookReceiver's timeout (12s) must be longer than the API integration timeout (12s)",
    ]);
  });

  it('rejects a processor timeout the payments function cannot wait for', () => {
    const violations = timingViolations(prodWith({ timeouts: { processorMilliseconds: 12_000 } }), serviceFunctions);
    expect(violations).toEqual(["processor timeout (12s) must be shorter than PaymentsCreate's timeout (12s)"]);
  });

  it('rejects records that could expire before recovery finds them', () => {
    const violations = timingViolations(prodWith({ idempotency: { ttlSeconds: 240 } }), serviceFunctions);
    expect(violations).toEqual([
      "ttl (240s) must be longer than twice the lease (90s) plus the completer's period (60s): an unfinished " +
        'operation could expire before recovery finds it',
    ]);
  });

  it('rejects a lease that outlasts the visibility timeout of a redelivered settlement', () => {
    const config = prodWith({ idempotency: { leaseSeconds: 200 } });
    expect(settlementVisibilityTimeoutSeconds(config)).toBe(180);
    expect(timingViolations(config, serviceFunctions)).toEqual([
      'lease (200s) must not exceed the settlement visibility timeout (180s)',
    ]);
  });

  it('rejects a settlement age alarm that one normal retry trips, or that only fires after the DLQ', () => {
    const withAge = (settlementAgeSeconds: number) => ({
      ...environments.prod,
      alarms: { ...environments.prod.alarms, settlementAgeSeconds },
    });
    const sentence = (age: number) =>
      `settlement age alarm (${age}s) must lie between the visibility timeout (180s) and the 900s after which a ` +
      'failing settlement reaches the DLQ';
    expect(timingViolations(withAge(180), serviceFunctions)).toEqual([sentence(180)]);
    expect(timingViolations(withAge(900), serviceFunctions)).toEqual([sentence(900)]);
    expect(timingViolations(withAge(181), serviceFunctions)).toEqual([]);
  });

  it("rejects an integration timeout beyond API Gateway's 29 s, and non-integer seconds", () => {
    expect(timingViolations(prodWith({ timeouts: { apiIntegrationSeconds: 30, apiFunctionSeconds: 40 } }), [])).toEqual(
      ["API integration timeout 30s exceeds API Gateway's 29s maximum"],
    );
    expect(timingViolations(prodWith({ timeouts: { authorizerSeconds: 2.5 } }), [])).toEqual([
      'authorizerSeconds must be a positive integer, got 2.5',
    ]);
  });
});

describe('functionTimeoutSeconds', () => {
  it('takes the timeout for what invokes the function', () => {
    const timeouts = Object.fromEntries(
      serviceFunctions.map((spec) => [spec.id, functionTimeoutSeconds(spec, environments.prod)]),
    );
    expect(timeouts).toEqual({
      PaymentsCreate: 12,
      PaymentsGet: 12,
      Authorizer: 5,
      WebhookReceiver: 12,
      SettlementConsumer: 30,
      PaymentsCompleter: 60,
    });
  });
});

describe('assertTiming', () => {
  it('names the environment and every violation', () => {
    const config = prodWith({ idempotency: { leaseSeconds: 10, ttlSeconds: 5 } });
    expect(() => assertTiming(config, serviceFunctions)).toThrow(
      /Environment 'prod' has inconsistent timeouts:\n {2}- ttl \(5s\) must be longer than twice the lease \(10s\)/,
    );
  });

  it('stops PaymentsStack before it builds anything', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const config = prodWith({ idempotency: { leaseSeconds: 10 } });
    expect(() => new PaymentsStack(app, 'Broken', { config })).toThrow(/inconsistent timeouts/);
    expect(app.node.children).toHaveLength(0);
  });
});
