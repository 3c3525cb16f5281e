import { Metrics } from '@aws-lambda-powertools/metrics';
import type middy from '@middy/core';

/** One Metrics instance per function, namespaced for the whole service (CloudWatch EMF via Powertools). */
export function serviceMetrics(serviceName: string): Metrics {
  return new Metrics({ namespace: process.env.POWERTOOLS_METRICS_NAMESPACE ?? 'Keystone', serviceName });
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
