import { serviceFunctions } from '../../lib/infra/functions';
import { localName, triggeredBy } from '../../lib/local/service-definitions';
import {
  functionSettings,
  type ServiceHandlers,
  serviceHttpApiRoutes,
  serviceRoutes,
} from '../../lib/local/service-functions';
import { SOURCE_DEFAULTS } from '../../lib/local/stack-settings';

/**
 * The local wiring is read from the definitions the CDK stack deploys: nothing in it names a function, so a new
 * definition is a new route (or consumer, or schedule) locally too. The end-to-end tests run the result; these
 * check the derivation itself.
 */
const handlers: ServiceHandlers = new Map(serviceFunctions.map((spec) => [spec.id, async () => spec.id]));

describe('localName', () => {
  it('is the construct id in kebab case', () => {
    expect(localName({ id: 'PaymentsCreate' })).toBe('payments-create');
    expect(localName({ id: 'Authorizer' })).toBe('authorizer');
    expect(localName({ id: 'WebhookReceiver2' })).toBe('webhook-receiver2');
  });
});

describe('serviceRoutes', () => {
  const routes = serviceRoutes(handlers, SOURCE_DEFAULTS);
  const [authorizer] = triggeredBy('authorizer');

  it('has one route per route definition, at its method and path, invoking its function', () => {
    expect(routes.map((route) => `${route.method} ${route.resource} ${route.functionName}`)).toEqual(
      triggeredBy('route').map((spec) => `${spec.trigger.method} ${spec.trigger.path} ${localName(spec)}`),
    );
    for (const [index, spec] of triggeredBy('route').entries()) {
      expect(routes[index]?.handler).toBe(handlers.get(spec.id));
      expect(routes[index]?.timeoutMs).toBe(SOURCE_DEFAULTS.timeoutsMs[spec.id]);
    }
  });

  it('puts the TOKEN authorizer in front of exactly the routes whose definition asks for it', () => {
    for (const [index, spec] of triggeredBy('route').entries()) {
      const route = routes[index]!;
      if (spec.trigger.authorization.kind === 'token') {
        expect(route.authorizer).toMatchObject({
          handler: handlers.get(authorizer!.id),
          functionName: localName(authorizer!),
          resultTtlSeconds: SOURCE_DEFAULTS.authorizerResultTtlSeconds,
        });
      } else {
        expect(route.authorizer).toBeUndefined();
      }
    }
    expect(routes.some((route) => route.authorizer)).toBe(true);
    expect(routes.some((route) => !route.authorizer)).toBe(true);
  });

  it('refuses to wire a function it has no handler for, naming it', () => {
    const missing = new Map(handlers);
    missing.delete('PaymentsGet');
    expect(() => serviceRoutes(missing, SOURCE_DEFAULTS)).toThrow('the local stack has no function PaymentsGet');
  });
});

describe('serviceHttpApiRoutes', () => {
  const routes = serviceHttpApiRoutes(handlers, { ...SOURCE_DEFAULTS, authorizerResultTtlSeconds: 60 });
  const [authorizer] = triggeredBy('authorizer');

  it('has the same routes as the REST API, invoking the same functions with the same timeouts', () => {
    expect(routes.map((route) => `${route.method} ${route.path} ${route.functionName}`)).toEqual(
      triggeredBy('route').map((spec) => `${spec.trigger.method} ${spec.trigger.path} ${localName(spec)}`),
    );
    for (const [index, spec] of triggeredBy('route').entries()) {
      expect(routes[index]?.handler).toBe(handlers.get(spec.id));
      expect(routes[index]?.timeoutMs).toBe(SOURCE_DEFAULTS.timeoutsMs[spec.id]);
    }
  });

  it('puts the authorizer function, as a REQUEST authorizer on the Authorization header, where the REST API has it', () => {
    for (const [index, spec] of triggeredBy('route').entries()) {
      const route = routes[index]!;
      if (spec.trigger.authorization.kind === 'token') {
        expect(route.authorizer).toMatchObject({
          handler: handlers.get(authorizer!.id),
          functionName: localName(authorizer!),
          identitySource: ['$request.header.Authorization'],
          resultTtlSeconds: 60,
        });
      } else {
        expect(route.authorizer).toBeUndefined();
      }
    }
    expect(routes.some((route) => route.authorizer)).toBe(true);
    expect(routes.some((route) => !route.authorizer)).toBe(true);
  });
});

describe('functionSettings', () => {
  it("gives the functions the settings they read, and nothing else of the shell's environment", () => {
    const shell = {
      STORE: 'postgres',
      DATABASE_URL: 'postgres://127.0.0.1/keystone',
      DATABASE_POOL_MAX: '2',
      IDEMPOTENCY_LEASE_SECONDS: '4',
      PAYMENTS_TABLE: 'local-payments',
      PROCESSOR_URL: 'http://127.0.0.1:4010',
      SETTLEMENT_QUEUE_URL: 'http://127.0.0.1:9324/q',
      POWERTOOLS_METRICS_DISABLED: 'true',
      DYNAMODB_ENDPOINT: 'http://127.0.0.1:8000',
      LOG_LEVEL: 'DEBUG',
      KEYSTONE_IDEMPOTENCY_DISABLED: 'true',
      AWS_PROFILE: 'production',
      AWS_SECRET_ACCESS_KEY: 'a real one',
      AWS_LAMBDA_FUNCTION_NAME: 'not-this-one',
      NODE_OPTIONS: '--inspect',
      HOME: '/root',
    };
    const {
      KEYSTONE_IDEMPOTENCY_DISABLED,
      AWS_PROFILE,
      AWS_SECRET_ACCESS_KEY,
      AWS_LAMBDA_FUNCTION_NAME,
      NODE_OPTIONS,
      HOME,
      ...read
    } = shell;
    expect(functionSettings(shell)).toEqual(read);
  });
});
