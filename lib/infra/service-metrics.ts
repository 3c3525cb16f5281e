import type { Duration } from 'aws-cdk-lib';
import { Metric } from 'aws-cdk-lib/aws-cloudwatch';
import { metricsNamespace, SERVICE_DIMENSION } from '../metrics/definitions';
import type { EnvironmentConfig } from './environments';
import type { FunctionMetrics } from './functions';

/** A function's custom metrics, as declared in its spec, for alarms and the dashboard. */
export interface PublishedMetrics extends FunctionMetrics {
  /** The function's id in the function table (names the alarms). */
  readonly functionId: string;
}

/**
 * One of the service's own metrics (published by Powertools Metrics) exactly as the functions publish it: in the
 * environment's namespace, with the `service` dimension. Summed: each is a count, one per event.
 */
export function serviceMetric(
  config: EnvironmentConfig,
  service: string,
  metricName: string,
  period: Duration,
): Metric {
  return new Metric({
    namespace: metricsNamespace(config.name),
    metricName,
    dimensionsMap: { [SERVICE_DIMENSION]: service },
    statistic: 'Sum',
    period,
  });
}
