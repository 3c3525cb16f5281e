import { METRICS_KEY } from '@aws-lambda-powertools/commons';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type middy from '@middy/core';
import { DEFAULT_METRICS_NAMESPACE, METRICS_NAMESPACE_ENV } from '../metrics/definitions';

/**
 * One Metrics instance per function (CloudWatch EMF via Powertools), in the namespace the stack sets for the
 * environment; `serviceName` becomes the `service` dimension.
 */
export function serviceMetrics(serviceName: string): Metrics {
  return new Metrics({ namespace: process.env[METRICS_NAMESPACE_ENV] ?? DEFAULT_METRICS_NAMESPACE, serviceName });
}

/**
 * Publishes what the invocation recorded, on success and on error. Unlike Powertools' own `logMetrics`, an
 * invocation that recorded nothing (a 400 before the claim, say) publishes nothing and logs no warning about it.
 *
 * Like `logMetrics`, it also registers its publish as the invocation's metrics cleanup (Powertools' protocol,
 * `request.internal`): middy skips every `after` when a middleware answers early (a replay, a 409, a 401), and the
 * library's middlewares that do so run the registered cleanups first. What such an invocation counted is then
 * published by that very invocation, not by a later one (or never, when the container stops first).
 */
export function publishMetrics(metrics: Metrics): middy.MiddlewareObj {
  const publish = async function publishMetricsIfAny() {
    if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
  };
  return {
    before: async function registerMetricsCleanup(request) {
      (request.internal as Record<string, unknown>)[METRICS_KEY] = publish;
    },
    after: publish,
    onError: publish,
  };
}
