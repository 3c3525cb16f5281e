import { App } from 'aws-cdk-lib';
import { ENVIRONMENT_NAMES, type EnvironmentConfig, environments } from '../../lib/infra/environments';
import { serviceFunctions } from '../../lib/infra/functions';
import { assertLimits, limitViolations } from '../../lib/infra/limits';
import { PaymentsStack } from '../../lib/infra/payments-stack';

/** prod with some limits changed. */
function prodWith(
  change: Partial<Pick<EnvironmentConfig, 'firewall' | 'authorizer' | 'concurrency'>>,
): EnvironmentConfig {
  return { ...environments.prod, ...change };
}

describe('limitViolations', () => {
  it.each(ENVIRONMENT_NAMES)('finds none in %s', (name) => {
    expect(limitViolations(environments[name], serviceFunctions)).toEqual([]);
  });

  it.each(ENVIRONMENT_NAMES)('finds none in %s on PostgreSQL', (name) => {
    expect(limitViolations({ ...environments[name], store: 'postgres' }, serviceFunctions)).toEqual([]);
  });

  it('rejects, on PostgreSQL, a downstream the VPC would not let the functions reach', () => {
    const config: EnvironmentConfig = {
      ...environments.prod,
      store: 'postgres',
      processorUrl: 'http://processor.example.com',
      mailerUrl: 'https://mailer.example.com:8443',
    };
    expect(limitViolations(config, serviceFunctions)).toEqual([
      'processorUrl (http://processor.example.com) must be an https URL on port 443: on PostgreSQL the functions ' +
        'may leave their VPC on HTTPS only',
      'mailerUrl (https://mailer.example.com:8443) must be an https URL on port 443: on PostgreSQL the functions ' +
        'may leave their VPC on HTTPS only',
    ]);
    // On DynamoDB the functions are not in a VPC: any URL is theirs to call.
    expect(limitViolations({ ...config, store: 'dynamodb' }, serviceFunctions)).toEqual([]);
  });

  it('rejects, on PostgreSQL, a capacity range Aurora Serverless v2 would refuse', () => {
    const config: EnvironmentConfig = {
      ...environments.prod,
      store: 'postgres',
      database: { ...environments.prod.database, minCapacityAcu: 4, maxCapacityAcu: 2.25 },
    };
    expect(limitViolations(config, serviceFunctions)).toEqual([
      'database capacity must be in half ACUs from 0.5 to 256, got 4 to 2.25',
      'database maxCapacityAcu (2.25) must exceed minCapacityAcu (4)',
    ]);
  });

  it("rejects a per-IP WAF limit below the stage's own rate (the 5,000 per 5 minutes that cut merchants off)", () => {
    const firewall = { ...environments.prod.firewall, perIp: { limitPer5Minutes: 5_000, action: 'block' as const } };
    expect(limitViolations(prodWith({ firewall }), serviceFunctions)).toEqual([
      "WAF perIp limit (5000 per 5 minutes) is below the stage's 200 rps (60000 per 5 minutes): one egress IP would " +
        'be blocked before the stage throttles it',
    ]);
  });

  it("rejects WAF limits outside WAF's bounds", () => {
    const firewall = { ...environments.prod.firewall, perApiKey: { limitPer5Minutes: 5, action: 'count' as const } };
    expect(limitViolations(prodWith({ firewall }), serviceFunctions)).toEqual([
      'WAF perApiKey limit must be an integer from 10 to 2000000000, got 5',
    ]);
  });

  it("rejects an authorizer cache beyond API Gateway's hour", () => {
    expect(limitViolations(prodWith({ authorizer: { cacheSeconds: 7200 } }), serviceFunctions)).toEqual([
      'authorizer cacheSeconds must be an integer from 0 to 3600, got 7200',
    ]);
  });

  it('rejects reservations for unknown functions, and a queue consumer reserved below its maximum concurrency', () => {
    const concurrency = { settlementMaxConcurrency: 10, reserved: { Nobody: 5, SettlementConsumer: 4 } };
    expect(limitViolations(prodWith({ concurrency }), serviceFunctions)).toEqual([
      'reserved concurrency for unknown function Nobody',
      "SettlementConsumer's reserved concurrency (4) is below the settlement event source's maximum concurrency " +
        '(10): Lambda would throttle the poller and messages would head for the DLQ',
    ]);
  });

  it("rejects a maximum concurrency outside SQS's 2 to 1000", () => {
    const concurrency = { settlementMaxConcurrency: 1, reserved: {} };
    expect(limitViolations(prodWith({ concurrency }), serviceFunctions)).toEqual([
      'settlementMaxConcurrency must be an integer from 2 to 1000, got 1',
    ]);
  });
});

describe('assertLimits', () => {
  it('stops PaymentsStack before it builds anything', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const config = prodWith({ authorizer: { cacheSeconds: -1 } });
    expect(() => assertLimits(config, serviceFunctions)).toThrow(/Environment 'prod' has inconsistent limits:\n/);
    expect(() => new PaymentsStack(app, 'Broken', { config })).toThrow(/inconsistent limits/);
    expect(app.node.children).toHaveLength(0);
  });
});
