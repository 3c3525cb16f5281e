import type { EnvironmentConfig } from './environments';
import type { FunctionSpec } from './functions';

/** WAF rate-based rules count requests over this window; API Gateway's stage throttle is per second. */
export const WAF_WINDOW_SECONDS = 300;
const WAF_MIN_LIMIT = 10;
const WAF_MAX_LIMIT = 2_000_000_000;
const MAX_AUTHORIZER_CACHE_SECONDS = 3600;
const SQS_MAX_CONCURRENCY = { min: 2, max: 1000 } as const;

/**
 * Every way an environment's traffic limits contradict each other or AWS's bounds, as sentences (empty when none).
 *
 * - The per-IP WAF limit must allow the stage's whole rate: one merchant may send everything from one egress IP, and
 *   WAF's 403 would then cut it off below the throttle the stage promises.
 * - A queue consumer's reserved concurrency must not be below the event source's maximum concurrency: Lambda would
 *   throttle the poller's invocations and send messages back to the queue, each receive counting towards the DLQ.
 * - On PostgreSQL the functions are in a VPC whose security groups let them out on HTTPS (443) only: the processor and
 *   the mailer must be HTTPS URLs on the default port, or every call would time out.
 * - The database's capacity range must be one Aurora Serverless v2 accepts.
 */
export function limitViolations(config: EnvironmentConfig, specs: readonly FunctionSpec[]): string[] {
  const violations: string[] = [];
  const { perApiKey, perIp } = config.firewall;
  for (const [name, rule] of Object.entries({ perApiKey, perIp })) {
    const limit = rule.limitPer5Minutes;
    if (!Number.isInteger(limit) || limit < WAF_MIN_LIMIT || limit > WAF_MAX_LIMIT) {
      violations.push(`WAF ${name} limit must be an integer from ${WAF_MIN_LIMIT} to ${WAF_MAX_LIMIT}, got ${limit}`);
    }
  }
  const stagePer5Minutes = config.throttling.rateLimit * WAF_WINDOW_SECONDS;
  if (perIp.limitPer5Minutes < stagePer5Minutes) {
    violations.push(
      `WAF perIp limit (${perIp.limitPer5Minutes} per 5 minutes) is below the stage's ${config.throttling.rateLimit} ` +
        `rps (${stagePer5Minutes} per 5 minutes): one egress IP would be blocked before the stage throttles it`,
    );
  }
  const { cacheSeconds } = config.authorizer;
  if (!Number.isInteger(cacheSeconds) || cacheSeconds < 0 || cacheSeconds > MAX_AUTHORIZER_CACHE_SECONDS) {
    violations.push(`authorizer cacheSeconds must be an integer from 0 to 3600, got ${cacheSeconds}`);
  }
  const { settlementMaxConcurrency, reserved } = config.concurrency;
  if (
    !Number.isInteger(settlementMaxConcurrency) ||
    settlementMaxConcurrency < SQS_MAX_CONCURRENCY.min ||
    settlementMaxConcurrency > SQS_MAX_CONCURRENCY.max
  ) {
    violations.push(`settlementMaxConcurrency must be an integer from 2 to 1000, got ${settlementMaxConcurrency}`);
  }
  for (const [id, value] of Object.entries(reserved)) {
    const spec = specs.find((candidate) => candidate.id === id);
    if (!spec) violations.push(`reserved concurrency for unknown function ${id}`);
    if (!Number.isInteger(value) || value < 1) {
      violations.push(`${id}'s reserved concurrency must be a positive integer, got ${value}`);
    }
    if (spec?.trigger.kind === 'settlement-queue' && value < settlementMaxConcurrency) {
      violations.push(
        `${id}'s reserved concurrency (${value}) is below the settlement event source's maximum concurrency ` +
          `(${settlementMaxConcurrency}): Lambda would throttle the poller and messages would head for the DLQ`,
      );
    }
  }
  if (config.store === 'postgres') violations.push(...databaseViolations(config));
  return violations;
}

function databaseViolations(config: EnvironmentConfig): string[] {
  const violations: string[] = [];
  for (const [name, url] of Object.entries({
    processorUrl: config.processorUrl,
    mailerUrl: config.mailerUrl,
    warehouseUrl: config.warehouseUrl,
  })) {
    const parsed = URL.canParse(url) ? new URL(url) : undefined;
    if (parsed?.protocol !== 'https:' || parsed.port !== '') {
      violations.push(
        `${name} (${url}) must be an https URL on port 443: on PostgreSQL the functions may leave their VPC on ` +
          'HTTPS only',
      );
    }
  }
  const { minCapacityAcu, maxCapacityAcu, maxConnectionsPercent } = {
    ...config.database,
    maxConnectionsPercent: config.database.proxy.maxConnectionsPercent,
  };
  const halfSteps = (acu: number) => Number.isInteger(acu * 2);
  if (!halfSteps(minCapacityAcu) || !halfSteps(maxCapacityAcu) || minCapacityAcu < 0.5 || maxCapacityAcu > 256) {
    violations.push(
      `database capacity must be in half ACUs from 0.5 to 256, got ${minCapacityAcu} to ${maxCapacityAcu}`,
    );
  }
  if (maxCapacityAcu <= minCapacityAcu) {
    violations.push(`database maxCapacityAcu (${maxCapacityAcu}) must exceed minCapacityAcu (${minCapacityAcu})`);
  }
  if (!Number.isInteger(maxConnectionsPercent) || maxConnectionsPercent < 1 || maxConnectionsPercent > 100) {
    violations.push(`proxy maxConnectionsPercent must be an integer from 1 to 100, got ${maxConnectionsPercent}`);
  }
  return violations;
}

/** Throws, at synth time, when an environment's limits contradict each other. */
export function assertLimits(config: EnvironmentConfig, specs: readonly FunctionSpec[]): void {
  const violations = limitViolations(config, specs);
  if (violations.length > 0) {
    throw new Error(
      `Environment '${config.name}' has inconsistent limits:\n${violations.map((v) => `  - ${v}`).join('\n')}`,
    );
  }
}
