import type { MappedGatewayResponse } from '@keystone-idempotency/local-aws/api-gateway';
import { ConfigurationError, DEFAULT_LEASE_SECONDS, DEFAULT_TTL_SECONDS } from 'keystone-idempotency/engine';
import { type FunctionSpec, serviceFunctions } from '../infra/functions';
import { THROTTLED_INTEGRATION } from '../infra/throttling';
import { numberEnv } from '../runtime/env';
import { DEFAULT_CALL_TIMEOUTS_MS, type TimedFunction, type Timings } from '../timing/timing';
import type { DeployedStack } from './cloud-assembly';
import { onlyTriggeredBy, triggeredBy } from './service-definitions';

type Env = Readonly<Record<string, string | undefined>>;

/** The local stack's clocks and queue settings: what its emulators, and its functions, run with. */
export interface StackSettings {
  readonly leaseSeconds: number;
  readonly ttlSeconds: number;
  readonly processorTimeoutMs: number;
  readonly warehouseTimeoutMs: number;
  readonly mailerTimeoutMs: number;
  /** Each function's Lambda timeout, by its construct id (lib/infra/functions.ts). */
  readonly timeoutsMs: Readonly<Record<string, number>>;
  /** How long the gateway waits for a route's function before answering 504. */
  readonly integrationTimeoutMs: number;
  /** How long the gateway caches an authorizer's answer per token (0: not at all). */
  readonly authorizerResultTtlSeconds: number;
  readonly settlement: {
    readonly visibilitySeconds: number;
    readonly maxReceiveCount: number;
    readonly batchSize: number;
    /** Batches in flight at once (the event source mapping's maximum concurrency). */
    readonly concurrency: number;
  };
  /** The completer's period. */
  readonly completerIntervalSeconds: number;
  /**
   * Each function's concurrency, invocations in flight at most, past which Lambda throttles it: `reserved` by
   * construct id where the definitions reserve it, `unreserved` for every other function.
   */
  readonly concurrency: { readonly unreserved: number; readonly reserved: Readonly<Record<string, number>> };
  /** What the REST API answers an invocation Lambda throttled with (its INTEGRATION_FAILURE gateway response). */
  readonly throttledResponse?: MappedGatewayResponse;
}

/**
 * Invocations in flight per function whose definition reserves none: Lambda's account-wide limit, as this machine
 * can honour it. Fifty concurrent requests fit with room; at about 60 MB a process, a function's environments take
 * about 4 GB at their most, and give it back once idle (environment-pool.ts).
 */
export const LOCAL_CONCURRENCY = 64;

/**
 * The local stack's own defaults, for the functions run from source: short enough for a demo to show recovery in
 * seconds, and in the deployed relation to each other (integration < function < lease ≤ visibility timeout).
 */
export const SOURCE_DEFAULTS: StackSettings = {
  leaseSeconds: DEFAULT_LEASE_SECONDS,
  ttlSeconds: DEFAULT_TTL_SECONDS,
  processorTimeoutMs: DEFAULT_CALL_TIMEOUTS_MS.processor,
  warehouseTimeoutMs: DEFAULT_CALL_TIMEOUTS_MS.warehouse,
  mailerTimeoutMs: DEFAULT_CALL_TIMEOUTS_MS.mailer,
  // An order's calls, one after another, take up to 26 s (lib/infra/functions.ts): its function, and the completer
  // that drives orders forward, get 28 s, as the deployed OrdersCreate does.
  timeoutsMs: Object.fromEntries(
    serviceFunctions.map((spec) => [spec.id, spec.calls?.includes('warehouse') ? 28_000 : 10_000]),
  ),
  integrationTimeoutMs: 9_000,
  authorizerResultTtlSeconds: 0,
  // Six times the consumer's timeout, as AWS advises for an SQS event source; the batch its definition asks for.
  settlement: {
    visibilitySeconds: 60,
    maxReceiveCount: 5,
    batchSize: onlyTriggeredBy('settlement-queue').trigger.batchSize,
    concurrency: 5,
  },
  completerIntervalSeconds: 10,
  concurrency: { unreserved: LOCAL_CONCURRENCY, reserved: {} },
  throttledResponse: THROTTLED_INTEGRATION,
};

/** Whether CONSUMER_FUNCTION_TIMEOUT_MS sets the function's timeout (the queue's consumer), or API_FUNCTION_TIMEOUT_MS. */
const isQueueConsumer = (spec: FunctionSpec) => spec.trigger.kind === 'settlement-queue';

/**
 * What the synthesized template fixes, as the local stack's defaults when it runs the bundles: each function's
 * timeout, the lease, TTL and processor timeout its environment carries, the API's integration timeout and
 * authorizer cache, the settlement queue's visibility timeout and redrive, its event source's batch size and
 * concurrency, the completer's schedule, each function's reserved concurrency and the REST API's answer to a
 * throttled invocation.
 */
export function deployedSettings(stack: DeployedStack): StackSettings {
  const fn = (spec: FunctionSpec) => stack.function(spec.id);
  const timeoutsMs = Object.fromEntries(serviceFunctions.map((spec) => [spec.id, fn(spec).timeoutSeconds * 1000]));
  const routes = triggeredBy('route').map((spec) =>
    required(stack.integrationTimeoutMs(fn(spec)), `${spec.id} has no API method`),
  );
  const consumer = onlyTriggeredBy('settlement-queue');
  const queue = required(stack.queueSource(fn(consumer)), `${consumer.id} has no SQS event source`);
  const authorizer = onlyTriggeredBy('authorizer');
  // Every scheduled function runs at the environment's one period (recoveryPeriodMinutes): any of them tells it.
  const [scheduled] = triggeredBy('schedule');
  const throttledResponse = stack.gatewayResponse('INTEGRATION_FAILURE');
  return {
    leaseSeconds: Number(sharedLiteral(stack, 'IDEMPOTENCY_LEASE_SECONDS')),
    ttlSeconds: Number(sharedLiteral(stack, 'IDEMPOTENCY_TTL_SECONDS')),
    processorTimeoutMs: Number(sharedLiteral(stack, 'PROCESSOR_TIMEOUT_MS')),
    warehouseTimeoutMs: Number(sharedLiteral(stack, 'WAREHOUSE_TIMEOUT_MS')),
    mailerTimeoutMs: Number(sharedLiteral(stack, 'MAILER_TIMEOUT_MS')),
    timeoutsMs,
    integrationTimeoutMs: Math.min(...routes),
    authorizerResultTtlSeconds: required(
      stack.authorizerResultTtlSeconds(fn(authorizer)),
      `${authorizer.id} is no authorizer`,
    ),
    settlement: {
      visibilitySeconds: queue.visibilityTimeoutSeconds,
      maxReceiveCount: required(queue.maxReceiveCount, 'the settlement queue has no redrive policy'),
      batchSize: queue.batchSize,
      concurrency: queue.maximumConcurrency ?? SOURCE_DEFAULTS.settlement.concurrency,
    },
    completerIntervalSeconds: required(
      scheduled && stack.schedulePeriodSeconds(fn(scheduled)),
      `${scheduled?.id ?? 'no function'} has no schedule`,
    ),
    concurrency: {
      unreserved: LOCAL_CONCURRENCY,
      reserved: Object.fromEntries(
        serviceFunctions.flatMap((spec) => {
          const reserved = fn(spec).reservedConcurrency;
          return reserved === undefined ? [] : [[spec.id, reserved]];
        }),
      ),
    },
    ...(throttledResponse ? { throttledResponse } : {}),
  };
}

/**
 * The settings for a run: the defaults (the local stack's, or the template's), with each variable of the README's
 * "Local settings" that is set replacing its part. The derived relations hold in both cases: the integration timeout
 * stays under the API functions' timeout, and the consumer's timeout within the visibility timeout.
 */
export function stackSettings(env: Env, defaults: StackSettings = SOURCE_DEFAULTS): StackSettings {
  const apiTimeoutMs = env.API_FUNCTION_TIMEOUT_MS ? numberEnv('API_FUNCTION_TIMEOUT_MS', 0, env) : undefined;
  const visibilitySeconds = numberEnv('SETTLEMENT_VISIBILITY_SECONDS', defaults.settlement.visibilitySeconds, env);
  const timeoutsMs: Record<string, number> = { ...defaults.timeoutsMs };
  for (const spec of serviceFunctions) {
    const timeoutMs = defaults.timeoutsMs[spec.id] ?? 0;
    if (!isQueueConsumer(spec)) {
      if (apiTimeoutMs !== undefined) timeoutsMs[spec.id] = apiTimeoutMs;
      continue;
    }
    const consumerMs = numberEnv('CONSUMER_FUNCTION_TIMEOUT_MS', timeoutMs, env);
    timeoutsMs[spec.id] = Math.min(consumerMs, visibilitySeconds * 1000);
  }
  return {
    ...defaults,
    leaseSeconds: numberEnv('IDEMPOTENCY_LEASE_SECONDS', defaults.leaseSeconds, env),
    ttlSeconds: numberEnv('IDEMPOTENCY_TTL_SECONDS', defaults.ttlSeconds, env),
    processorTimeoutMs: numberEnv('PROCESSOR_TIMEOUT_MS', defaults.processorTimeoutMs, env),
    warehouseTimeoutMs: numberEnv('WAREHOUSE_TIMEOUT_MS', defaults.warehouseTimeoutMs, env),
    mailerTimeoutMs: numberEnv('MAILER_TIMEOUT_MS', defaults.mailerTimeoutMs, env),
    timeoutsMs,
    integrationTimeoutMs: Math.min(
      defaults.integrationTimeoutMs,
      ...triggeredBy('route').map((spec) => (timeoutsMs[spec.id] ?? 0) - 500),
    ),
    settlement: {
      ...defaults.settlement,
      visibilitySeconds,
      maxReceiveCount: numberEnv('SETTLEMENT_MAX_RECEIVE_COUNT', defaults.settlement.maxReceiveCount, env),
    },
    completerIntervalSeconds: numberEnv('COMPLETER_INTERVAL_SECONDS', defaults.completerIntervalSeconds, env),
    concurrency: {
      ...defaults.concurrency,
      unreserved: wholeNumberEnv('LOCAL_FUNCTION_CONCURRENCY', defaults.concurrency.unreserved, env),
    },
  };
}

function wholeNumberEnv(name: string, fallback: number, env: Env): number {
  const value = numberEnv(name, fallback, env);
  if (!Number.isInteger(value)) {
    throw new ConfigurationError(
      `environment variable ${name} must be a whole number, got ${JSON.stringify(env[name])}`,
    );
  }
  return value;
}

/** The settings in the shared timing rules' terms (lib/timing), which the local stack checks before it starts. */
export function timingsOf(settings: StackSettings): Timings {
  const triggers = { route: 'route', authorizer: 'authorizer', 'settlement-queue': 'queue', schedule: 'schedule' };
  return {
    leaseMs: settings.leaseSeconds * 1000,
    ttlMs: settings.ttlSeconds * 1000,
    apiIntegrationMs: settings.integrationTimeoutMs,
    processorTimeoutMs: settings.processorTimeoutMs,
    warehouseTimeoutMs: settings.warehouseTimeoutMs,
    mailerTimeoutMs: settings.mailerTimeoutMs,
    queueVisibilityMs: settings.settlement.visibilitySeconds * 1000,
    queueMaxReceiveCount: settings.settlement.maxReceiveCount,
    completerPeriodMs: settings.completerIntervalSeconds * 1000,
    functions: serviceFunctions.map(
      (spec): TimedFunction => ({
        name: spec.id,
        timeoutMs: settings.timeoutsMs[spec.id] ?? 0,
        trigger: triggers[spec.trigger.kind] as TimedFunction['trigger'],
        calls: spec.calls ?? [],
      }),
    ),
  };
}

/**
 * A variable that every function setting it sets to the same literal (one lease for the whole service): the local
 * stack's emulators use the same value as the functions.
 */
function sharedLiteral(stack: DeployedStack, name: string): string {
  const values = new Set<unknown>();
  for (const fn of stack.functions.values()) if (name in fn.environment) values.add(fn.environment[name]);
  const [value, ...others] = [...values];
  if (typeof value !== 'string' || others.length > 0) {
    throw new ConfigurationError(`${stack.stackName}'s functions should share one literal ${name}, got ${[...values]}`);
  }
  return value;
}

function required<T>(value: T | undefined, message: string): T {
  if (value === undefined) throw new Error(message);
  return value;
}
