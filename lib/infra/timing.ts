import type { EnvironmentConfig } from './environments';
import type { FunctionSpec } from './functions';
import { SETTLEMENT_MAX_RECEIVE_COUNT } from './settlement-queue';

/**
 * SQS visibility timeout as a multiple of the consumer's timeout. AWS recommends at least 6x for an SQS event
 * source: the poller may retry a throttled invocation, and the message must stay hidden meanwhile.
 */
export const VISIBILITY_TIMEOUT_FACTOR = 6;

/** API Gateway's default maximum integration timeout for a REST API. */
const MAX_INTEGRATION_SECONDS = 29;
const MAX_LAMBDA_TIMEOUT_SECONDS = 900;
const MAX_VISIBILITY_TIMEOUT_SECONDS = 12 * 60 * 60;

/** A function's timeout in this environment, chosen by what invokes it. */
export function functionTimeoutSeconds(spec: FunctionSpec, config: EnvironmentConfig): number {
  switch (spec.trigger.kind) {
    case 'route':
      return config.timeouts.apiFunctionSeconds;
    case 'authorizer':
      return config.timeouts.authorizerSeconds;
    case 'settlement-queue':
      return config.timeouts.queueConsumerSeconds;
  }
}

export function settlementVisibilityTimeoutSeconds(config: EnvironmentConfig): number {
  return VISIBILITY_TIMEOUT_FACTOR * config.timeouts.queueConsumerSeconds;
}

/**
 * Every way an environment's timings break exactly-once processing, as sentences (empty when there is none).
 *
 * ```
 * request ──► API Gateway waits ≤ integration ──► 504; the client retries with the same key
 *             function runs      ≤ function timeout ──► finishes and commits (or dies)
 *             claim is owned     ≤ lease ──► only now may a retry take the key over
 *             record lives       ≤ ttl   ──► only now is the key forgotten
 * ```
 *
 * - lease > every function timeout: a lease that runs out while its owner still runs lets a retry take the key over
 *   and do the work a second time. A function timeout is the longest an owner can run.
 * - API function timeout > integration timeout: the gateway gives up first, and the function still finishes and
 *   records its result, so the client's retry replays it instead of finding a claim orphaned by a killed function.
 * - processor timeout < API function timeout: a slow processor becomes an error the function handles, not a kill.
 * - ttl > lease: a record must not expire while it is still claimed.
 * - lease ≤ visibility timeout: a message redelivered after its consumer died finds the dead claim's lease expired,
 *   instead of burning a receive (towards the DLQ) on "still in progress".
 * - visibility timeout < settlement age alarm < receives × visibility timeout: one retry (a message hidden for one
 *   visibility timeout) is normal and must not page; a message that fails every receive reaches the DLQ after about
 *   receives × visibility timeout, and the age alarm exists to fire before that.
 */
export function timingViolations(config: EnvironmentConfig, specs: readonly FunctionSpec[]): string[] {
  const { leaseSeconds, ttlSeconds } = config.idempotency;
  const { apiIntegrationSeconds, processorMilliseconds } = config.timeouts;
  const violations: string[] = [];
  for (const [name, value] of Object.entries({ leaseSeconds, ttlSeconds, ...config.timeouts })) {
    if (!Number.isInteger(value) || value <= 0) violations.push(`${name} must be a positive integer, got ${value}`);
  }
  if (apiIntegrationSeconds > MAX_INTEGRATION_SECONDS) {
    violations.push(
      `API integration timeout ${apiIntegrationSeconds}s exceeds API Gateway's ${MAX_INTEGRATION_SECONDS}s maximum`,
    );
  }
  if (ttlSeconds <= leaseSeconds) {
    violations.push(`ttl (${ttlSeconds}s) must be longer than the lease (${leaseSeconds}s)`);
  }
  for (const spec of specs) {
    const timeout = functionTimeoutSeconds(spec, config);
    if (timeout > MAX_LAMBDA_TIMEOUT_SECONDS) {
      violations.push(`${spec.id} timeout ${timeout}s exceeds Lambda's ${MAX_LAMBDA_TIMEOUT_SECONDS}s maximum`);
    }
    if (leaseSeconds <= timeout) {
      violations.push(`lease (${leaseSeconds}s) must be longer than ${spec.id}'s timeout (${timeout}s)`);
    }
    if (spec.trigger.kind === 'route' && timeout <= apiIntegrationSeconds) {
      violations.push(
        `${spec.id}'s timeout (${timeout}s) must be longer than the API integration timeout (${apiIntegrationSeconds}s)`,
      );
    }
    if (spec.calls?.includes('processor') && processorMilliseconds >= timeout * 1000) {
      violations.push(
        `processor timeout (${processorMilliseconds}ms) must be shorter than ${spec.id}'s timeout (${timeout}s)`,
      );
    }
  }
  const visibility = settlementVisibilityTimeoutSeconds(config);
  if (visibility > MAX_VISIBILITY_TIMEOUT_SECONDS) {
    violations.push(`settlement visibility timeout ${visibility}s exceeds SQS's ${MAX_VISIBILITY_TIMEOUT_SECONDS}s`);
  }
  if (leaseSeconds > visibility) {
    violations.push(`lease (${leaseSeconds}s) must not exceed the settlement visibility timeout (${visibility}s)`);
  }
  const age = config.alarms.settlementAgeSeconds;
  const deadLetterAfter = SETTLEMENT_MAX_RECEIVE_COUNT * visibility;
  if (age <= visibility || age >= deadLetterAfter) {
    violations.push(
      `settlement age alarm (${age}s) must lie between the visibility timeout (${visibility}s) and the ` +
        `${deadLetterAfter}s after which a failing settlement reaches the DLQ`,
    );
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
