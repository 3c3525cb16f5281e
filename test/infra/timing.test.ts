import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { ENVIRONMENT_NAMES, type EnvironmentConfig, environments } from '../../lib/infra/environments';
import { serviceFunctions } from '../../lib/infra/functions';
import { PaymentsStack } from '../../lib/infra/payments-stack';
import {
  assertTiming,
  functionTimeoutSeconds,
  settlementVisibilityTimeoutSeconds,
  timingsOf,
  timingViolations,
} from '../../lib/infra/timing';
import { recoveryThroughput, worstOperationMs } from '../../lib/timing/timing';

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

  it.each(ENVIRONMENT_NAMES)('finds none in %s on PostgreSQL', (name) => {
    expect(timingViolations({ ...environments[name], store: 'postgres' }, serviceFunctions)).toEqual([]);
  });

  describe('on PostgreSQL', () => {
    function prodOnPostgres(proxy: Partial<EnvironmentConfig['database']['proxy']>): EnvironmentConfig {
      const prod = environments.prod;
      return {
        ...prod,
        store: 'postgres',
        database: { ...prod.database, proxy: { ...prod.database.proxy, ...proxy } },
      };
    }

    it("rejects a connection borrow timeout that outlasts a function's timeout", () => {
      const violations = timingViolations(prodOnPostgres({ borrowTimeoutSeconds: 5 }), serviceFunctions);
      expect(violations).toEqual([
        "the proxy's connection borrow timeout (5s) must be shorter than Authorizer's timeout (5s): a request " +
          'waiting for a connection must fail while the function can still answer',
      ]);
    });

    it('rejects an idle client timeout that an invocation can outlast', () => {
      const violations = timingViolations(prodOnPostgres({ idleClientTimeoutSeconds: 60 }), serviceFunctions);
      expect(violations).toEqual([
        "the proxy's idle client timeout (60s) must be longer than PaymentsCompleter's timeout (60s): the proxy " +
          'must not close a connection during an invocation',
      ]);
    });

    it('leaves the proxy alone on DynamoDB, where there is none', () => {
      const onDynamoDb = { ...prodOnPostgres({ borrowTimeoutSeconds: 5 }), store: 'dynamodb' as const };
      expect(timingViolations(onDynamoDb, serviceFunctions)).toEqual([]);
    });
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
        'back would wait more than a lease for recovery to look',
    ]);
  });

  it('rejects an API function that API Gateway outwaits', () => {
    const violations = timingViolations(prodWith({ timeouts: { apiIntegrationSeconds: 12 } }), serviceFunctions);
    expect(violations).toEqual([
      "PaymentsCreate's timeout (12s) must be longer than the API integration timeout (12s)",
      "PaymentsGet's timeout (12s) must be longer than the API integration timeout (12s)",
      "OrdersGet's timeout (12s) must be longer than the API integration timeout (12s)",
      "InventoryGet's timeout (12s) must be longer than the API integration timeout (12s)",
      "WebhookReceiver's timeout (12s) must be longer than the API integration timeout (12s)",
    ]);
  });

  it("rejects a processor timeout the payments function cannot wait for, and an order's calls its function can't", () => {
    const violations = timingViolations(prodWith({ timeouts: { processorMilliseconds: 12_000 } }), serviceFunctions);
    expect(violations).toEqual([
      "processor timeout (12s) must be shorter than PaymentsCreate's timeout (12s)",
      "PaymentsCreate's outside calls one after another (processor 12s = 12s) plus 500ms for its store's writes must " +
        'fit in its timeout (12s)',
      "OrdersCreate's outside calls one after another (processor 12s + warehouse 5s + mailer 5s + processor 12s = " +
        "34s) plus 500ms for its store's writes must fit in its timeout (28s)",
    ]);
  });

  it("rejects the issue's orders function: its calls, one after another, outlast it", () => {
    // Before: the orders function at the API functions' 12 s, the warehouse at the processor's 8 s, and only the
    // processor's timeout checked against it.
    const issue = prodWith({ timeouts: { longerRouteFunctionSeconds: {}, warehouseMilliseconds: 8_000 } });
    expect(timingViolations(issue, serviceFunctions)).toEqual([
      "OrdersCreate's outside calls one after another (processor 8s + warehouse 8s + mailer 5s + processor 8s = 29s) " +
        "plus 500ms for its store's writes must fit in its timeout (12s)",
    ]);
    // A slower warehouse alone is refused too, and the completer, which drives orders, has room for one.
    expect(timingViolations(prodWith({ timeouts: { warehouseMilliseconds: 8_000 } }), serviceFunctions)).toEqual([
      "OrdersCreate's outside calls one after another (processor 8s + warehouse 8s + mailer 5s + processor 8s = 29s) " +
        "plus 500ms for its store's writes must fit in its timeout (28s)",
    ]);
  });

  it('takes a TTL as short as the lease: no unfinished recoverable operation expires, whatever the backlog', () => {
    expect(timingViolations(prodWith({ idempotency: { ttlSeconds: 90 } }), serviceFunctions)).toEqual([]);
    expect(timingViolations(prodWith({ idempotency: { ttlSeconds: 89 } }), serviceFunctions)).toEqual([
      'ttl (89s) must be at least the lease (90s)',
    ]);
  });

  it('rejects a completer whose timeout leaves no time to take an operation', () => {
    const violations = timingViolations(prodWith({ timeouts: { completerSeconds: 8 } }), serviceFunctions);
    expect(violations).toContain(
      "PaymentsCompleter's timeout (8s) must be longer than the processor timeout (8s) plus 250ms: a run would " +
        'never take an operation',
    );
  });

  it('rejects a recovery backlog alarm that one run handing over to the next trips', () => {
    const withAge = (recoveryBacklogAgeSeconds: number) => ({
      ...environments.prod,
      alarms: { ...environments.prod.alarms, recoveryBacklogAgeSeconds },
    });
    expect(timingViolations(withAge(120), serviceFunctions)).toEqual([
      "recovery backlog alarm (120s) must be longer than two of the completer's cycles (120s): one run leaving the " +
        'rest to the next is not falling behind',
    ]);
    expect(timingViolations(withAge(121), serviceFunctions)).toEqual([]);
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
    expect(
      timingViolations(prodWith({ timeouts: { longerRouteFunctionSeconds: { OrdersCreate: 27.5 } } }), []),
    ).toEqual(['OrdersCreate must be a positive integer, got 27.5']);
  });
});

describe('the completer, deployed', () => {
  // Its text as one line: a sentence may wrap anywhere.
  const readme = readFileSync(join(__dirname, '..', '..', 'docs', 'recovery.md'), 'utf8').replace(/\s+/g, ' ');

  it.each(ENVIRONMENT_NAMES)(
    'gets through what docs/recovery.md says in %s, however slowly the processor answers',
    (name) => {
      const timings = timingsOf(environments[name], serviceFunctions);
      const floor = recoveryThroughput(timings, worstOperationMs(timings));
      expect(floor).toMatchObject({ windowMs: 51_750, cycleMs: 60_000, perRun: 56, perMinute: 56 });
      // 200 abandoned at once (issue 17's backlog): five cycles after they are due, at the latest.
      expect(floor.drainMs(200)).toBe(300_000);
      expect(readme).toContain(
        'a run gets through at least 56 operations (8 workers, each taking one after another for 51.75 s, at 8.25 s ' +
          'each): 56 a minute',
      );
      expect(readme).toContain('200 payments abandoned at once are recorded at most 5 minutes after they are due');
    },
  );
});

describe('functionTimeoutSeconds', () => {
  it('takes the timeout for what invokes the function', () => {
    const timeouts = Object.fromEntries(
      serviceFunctions.map((spec) => [spec.id, functionTimeoutSeconds(spec, environments.prod)]),
    );
    expect(timeouts).toEqual({
      PaymentsCreate: 12,
      PaymentsGet: 12,
      OrdersCreate: 28,
      OrdersGet: 12,
      InventoryGet: 12,
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
      /Environment 'prod' has inconsistent timeouts:\n {2}- ttl \(5s\) must be at least the lease \(10s\)\n/,
    );
  });

  it('stops PaymentsStack before it builds anything', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const config = prodWith({ idempotency: { leaseSeconds: 10 } });
    expect(() => new PaymentsStack(app, 'Broken', { config })).toThrow(/inconsistent timeouts/);
    expect(app.node.children).toHaveLength(0);
  });
});
