import {
  callChainViolations,
  recoveryThroughput,
  type TimedFunction,
  type Timings,
  timingViolations as violationsOf,
  worstOperationMs,
} from '../timing/timing';
import type { EnvironmentConfig } from './environments';
import type { FunctionSpec } from './functions';

/**
 * SQS visibility timeout as a multiple of the consumer's timeout. AWS recommends at least 6x for an SQS event
 * source: the poller may retry a throttled invocation, and the message must stay hidden meanwhile.
 */
export const VISIBILITY_TIMEOUT_FACTOR = 6;

/**
 * Receives before a settlement moves to the dead-letter queue. Each failed batch item (reported through
 * ReportBatchItemFailures) counts one; five survives a downstream blip of several visibility timeouts.
 */
export const SETTLEMENT_MAX_RECEIVE_COUNT = 5;

/** A function's timeout in this environment, chosen by what invokes it. */
export function functionTimeoutSeconds(spec: FunctionSpec, config: EnvironmentConfig): number {
  switch (spec.trigger.kind) {
    case 'route':
      return config.timeouts.longerRouteFunctionSeconds[spec.id] ?? config.timeouts.apiFunctionSeconds;
    case 'authorizer':
      return config.timeouts.authorizerSeconds;
    case 'settlement-queue':
      return config.timeouts.queueConsumerSeconds;
    case 'schedule':
      return config.timeouts.completerSeconds;
  }
}

export function settlementVisibilityTimeoutSeconds(config: EnvironmentConfig): number {
  return VISIBILITY_TIMEOUT_FACTOR * config.timeouts.queueConsumerSeconds;
}

/** An environment's timings, in the shared rules' terms (the local stack builds the same from its variables). */
export function timingsOf(config: EnvironmentConfig, specs: readonly FunctionSpec[]): Timings {
  const triggers = { route: 'route', authorizer: 'authorizer', 'settlement-queue': 'queue', schedule: 'schedule' };
  return {
    leaseMs: config.idempotency.leaseSeconds * 1000,
    ttlMs: config.idempotency.ttlSeconds * 1000,
    apiIntegrationMs: config.timeouts.apiIntegrationSeconds * 1000,
    processorTimeoutMs: config.timeouts.processorMilliseconds,
    warehouseTimeoutMs: config.timeouts.warehouseMilliseconds,
    mailerTimeoutMs: config.timeouts.mailerMilliseconds,
    queueVisibilityMs: settlementVisibilityTimeoutSeconds(config) * 1000,
    queueMaxReceiveCount: SETTLEMENT_MAX_RECEIVE_COUNT,
    completerPeriodMs: config.idempotency.recoveryPeriodMinutes * 60_000,
    functions: specs.map(
      (spec): TimedFunction => ({
        name: spec.id,
        timeoutMs: functionTimeoutSeconds(spec, config) * 1000,
        trigger: triggers[spec.trigger.kind] as TimedFunction['trigger'],
        calls: spec.calls ?? [],
      }),
    ),
  };
}

/**
 * Every way an environment's timings break exactly-once processing, as sentences (empty when there is none): the
 * rules shared with the local stack (`lib/timing`), plus what only a deployment has:
 *
 * - every function's outside calls, one after another, fit in its timeout (`callChainViolations`, which the local
 *   stack only warns of);
 * - whole seconds and minutes (what CloudFormation takes);
 * - visibility timeout < settlement age alarm < receives × visibility timeout: one retry (a message hidden for one
 *   visibility timeout) is normal and must not page; a message that fails every receive reaches the DLQ after about
 *   receives × visibility timeout, and the age alarm exists to fire before that.
 * - recovery backlog alarm > 2 × the completer's cycle: an operation that became due just after a run ended, left by
 *   the next run when its time ran out, has waited up to two cycles; the next run takes it, and that must not page.
 * - on PostgreSQL, RDS Proxy's connection borrow timeout < every function's timeout (a request starved of a connection
 *   fails while its function can still answer, instead of the function being killed mid-wait), and the proxy's idle
 *   client timeout > every function's timeout (no invocation has its connection closed under it for idling).
 */
export function timingViolations(config: EnvironmentConfig, specs: readonly FunctionSpec[]): string[] {
  const { leaseSeconds, ttlSeconds, recoveryPeriodMinutes } = config.idempotency;
  const { longerRouteFunctionSeconds, ...timeouts } = config.timeouts;
  const whole = { leaseSeconds, ttlSeconds, recoveryPeriodMinutes, ...timeouts, ...longerRouteFunctionSeconds };
  const violations: string[] = [];
  for (const [name, value] of Object.entries(whole)) {
    if (!Number.isInteger(value) || value <= 0) violations.push(`${name} must be a positive integer, got ${value}`);
  }
  const visibility = settlementVisibilityTimeoutSeconds(config);
  const age = config.alarms.settlementAgeSeconds;
  const deadLetterAfter = SETTLEMENT_MAX_RECEIVE_COUNT * visibility;
  if (age <= visibility || age >= deadLetterAfter) {
    violations.push(
      `settlement age alarm (${age}s) must lie between the visibility timeout (${visibility}s) and the ` +
        `${deadLetterAfter}s after which a failing settlement reaches the DLQ`,
    );
  }
  const timings = timingsOf(config, specs);
  const backlogAge = config.alarms.recoveryBacklogAgeSeconds;
  if (timings.functions.some((fn) => fn.trigger === 'schedule')) {
    const cycleSeconds = recoveryThroughput(timings, worstOperationMs(timings)).cycleMs / 1000;
    if (backlogAge <= 2 * cycleSeconds) {
      violations.push(
        `recovery backlog alarm (${backlogAge}s) must be longer than two of the completer's cycles ` +
          `(${2 * cycleSeconds}s): one run leaving the rest to the next is not falling behind`,
      );
    }
  }
  if (config.store === 'postgres') violations.push(...proxyTimingViolations(config, specs));
  return [...violations, ...violationsOf(timings), ...callChainViolations(timings)];
}

function proxyTimingViolations(config: EnvironmentConfig, specs: readonly FunctionSpec[]): string[] {
  const { borrowTimeoutSeconds, idleClientTimeoutSeconds } = config.database.proxy;
  const violations: string[] = [];
  for (const [name, value] of Object.entries({ borrowTimeoutSeconds, idleClientTimeoutSeconds })) {
    if (!Number.isInteger(value) || value <= 0)
      violations.push(`proxy ${name} must be a positive integer, got ${value}`);
  }
  for (const spec of specs) {
    const timeout = functionTimeoutSeconds(spec, config);
    if (borrowTimeoutSeconds >= timeout) {
      violations.push(
        `the proxy's connection borrow timeout (${borrowTimeoutSeconds}s) must be shorter than ${spec.id}'s timeout ` +
          `(${timeout}s): a request waiting for a connection must fail while the function can still answer`,
      );
    }
    if (idleClientTimeoutSeconds <= timeout) {
      violations.push(
        `the proxy's idle client timeout (${idleClientTimeoutSeconds}s) must be longer than ${spec.id}'s timeout ` +
          `(${timeout}s): the proxy must not close a connection during an invocation`,
      );
    }
  }
  return violations;
}

/** Throws, at synth time, when an environment's timings would break exactly-once processing. */
export function assertTiming(config: EnvironmentConfig, specs: readonly FunctionSpec[]): void {
  const violations = timingViolations(config, specs);
  if (violations.length > 0) {
    throw new Error(
      `Environment '${config.name}' has inconsistent timeouts:\n${violations.map((v) => `  - ${v}`).join('\n')}`,
    );
  }
}
