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
 */
export function publishMetrics(metrics: Metrics): middy.MiddlewareObj {
  const publish = async function publishMetricsIfAny() {
    if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
  };
  return { after: publish, onError: publish };
}
