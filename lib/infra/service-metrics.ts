import type { Duration } from 'aws-cdk-lib';
import { Metric } from 'aws-cdk-lib/aws-cloudwatch';
import { metricsNamespace, SERVICE_DIMENSION } from '../metrics/definitions';
import type { EnvironmentConfig } from './environments';
import type { FunctionMetrics, FunctionSpec } from './functions';

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

/**
 * The metrics the functions publish, one entry per `service` dimension: functions that publish under the same one
 * (settlement and the completer both count recovery) add into the same metrics, so they get one set of alarms and
 * one dashboard panel, named after all of them.
 */
export function publishedMetrics(specs: readonly FunctionSpec[]): PublishedMetrics[] {
  const byService = new Map<
    string,
    { functionIds: string[]; names: Set<string>; service: FunctionMetrics['service'] }
  >();
  for (const spec of specs) {
    if (!spec.metrics) continue;
    const entry = byService.get(spec.metrics.service) ?? {
      functionIds: [],
      names: new Set<string>(),
      service: spec.metrics.service,
    };
    entry.functionIds.push(spec.id);
    for (const name of spec.metrics.names) entry.names.add(name);
    byService.set(spec.metrics.service, entry);
  }
  return [...byService.values()].map(({ functionIds, names, service }) => ({
    functionId: functionIds.join('And'),
    service,
    names: [...names],
  }));
}
