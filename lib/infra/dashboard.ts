import { Duration, Stack } from 'aws-cdk-lib';
import { Dashboard, GraphWidget, type IMetric, TextWidget } from 'aws-cdk-lib/aws-cloudwatch';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { MetricService, metricsNamespace, RecoveryBacklogMetric } from '../metrics/definitions';
import type { DatabaseMetrics } from './alarms';
import type { ApiMetrics } from './api';
import type { EnvironmentConfig } from './environments';
import { type PublishedMetrics, serviceMetric } from './service-metrics';

export interface OperationsDashboardProps {
  readonly config: EnvironmentConfig;
  readonly api: ApiMetrics;
  readonly functions: readonly { readonly id: string; readonly function: IFunction }[];
  readonly published: readonly PublishedMetrics[];
  readonly queue: IQueue;
  readonly deadLetterQueue: IQueue;
  /** On PostgreSQL: the cluster's and the proxy's metrics. */
  readonly database?: DatabaseMetrics;
}

const WIDTH = 24;
const HEIGHT = 6;

/**
 * One CloudWatch dashboard per environment (`<stack name>-operations`), top to bottom: the API's requests, errors and
 * latency; each function's idempotency outcomes (replays, in-flight duplicates, mismatches, takeovers, leases lost,
 * and whatever else its spec declares); latency p50 and p99 per function; the settlement queue's depth and age, the
 * dead-letter queue's depth, and how long payment recovery leaves the oldest due operation waiting; on PostgreSQL, the
 * proxy's and the cluster's connections (pinned ones apart), the cluster's capacity, deadlocks and the proxy's
 * latencies. Built from lists, like the alarms: new functions and metrics appear by themselves.
 */
export class OperationsDashboard extends Construct {
  readonly dashboard: Dashboard;

  constructor(scope: Construct, id: string, props: OperationsDashboardProps) {
    super(scope, id);
    const { config, api, functions, published, queue, deadLetterQueue, database } = props;
    const period = Duration.minutes(1);
    const stackName = Stack.of(this).stackName;
    this.dashboard = new Dashboard(this, 'Dashboard', {
      dashboardName: `${stackName}-operations`,
      defaultInterval: Duration.hours(3),
    });

    this.dashboard.addWidgets(
      new TextWidget({
        markdown: `# Keystone payments (${config.name})\nMetrics namespace \`${metricsNamespace(config.name)}\`.`,
        width: WIDTH,
        height: 2,
      }),
    );
    this.dashboard.addWidgets(
      graph('API requests', [api.metricCount({ period, statistic: 'Sum', label: 'requests' })]),
      graph('API errors', [
        api.metricClientError({ period, statistic: 'Sum', label: '4xx' }),
        api.metricServerError({ period, statistic: 'Sum', label: '5xx' }),
      ]),
      graph('API latency (ms)', [
        api.metricLatency({ period, statistic: 'p50', label: 'p50' }),
        api.metricLatency({ period, statistic: 'p99', label: 'p99' }),
      ]),
    );
    const outcomes = published.map(({ functionId, service, names }) =>
      graph(
        `${functionId} idempotency outcomes`,
        names.map((name) => serviceMetric(config, service, name, period).with({ label: name })),
        WIDTH / 2,
      ),
    );
    // Two to a row: the dashboard's row wraps past its 24 columns.
    if (outcomes.length > 0) this.dashboard.addWidgets(...outcomes);
    this.dashboard.addWidgets(
      graph(
        'Function latency p50 (ms)',
        functions.map(({ id: fnId, function: fn }) => fn.metricDuration({ period, statistic: 'p50', label: fnId })),
        WIDTH / 2,
      ),
      graph(
        'Function latency p99 (ms)',
        functions.map(({ id: fnId, function: fn }) => fn.metricDuration({ period, statistic: 'p99', label: fnId })),
        WIDTH / 2,
      ),
    );
    this.dashboard.addWidgets(
      graph('Settlement queue depth', [
        queue.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum', label: 'waiting' }),
        queue.metricApproximateNumberOfMessagesNotVisible({ period, statistic: 'Maximum', label: 'in flight' }),
      ]),
      graph('Oldest settlement (s)', [
        queue.metricApproximateAgeOfOldestMessage({ period, statistic: 'Maximum', label: 'age' }),
      ]),
      graph('Dead-letter queue depth', [
        deadLetterQueue.metricApproximateNumberOfMessagesVisible({
          period,
          statistic: 'Maximum',
          label: 'dead letters',
        }),
      ]),
      graph('Payment recovery: oldest left due (s)', [
        serviceMetric(config, MetricService.recovery, RecoveryBacklogMetric.oldestDueAge, period).with({
          statistic: 'Maximum',
          label: 'after each completer run',
        }),
      ]),
    );
    if (database) {
      const proxy = (name: string, label: string, statistic = 'Sum') =>
        database.metricProxy(name, { period, statistic, label });
      this.dashboard.addWidgets(
        graph('Database connections', [
          proxy('ClientConnections', 'clients on the proxy'),
          proxy('DatabaseConnections', "proxy's to the cluster"),
          proxy('MaxDatabaseConnectionsAllowed', "proxy's allowance"),
          proxy('DatabaseConnectionsCurrentlySessionPinned', 'pinned'),
          database.metricCluster('DatabaseConnections', { period, statistic: 'Maximum', label: 'on the cluster' }),
        ]),
        graph('Database capacity (ACU) and deadlocks', [
          database.metricCluster('ServerlessDatabaseCapacity', { period, statistic: 'Maximum', label: 'ACUs' }),
          database.metricCluster('Deadlocks', { period, statistic: 'Maximum', label: 'deadlocks/s' }),
        ]),
        graph('Proxy latency (µs)', [
          proxy('DatabaseConnectionsBorrowLatency', 'connection borrow', 'Average'),
          proxy('QueryResponseLatency', 'query response', 'Average'),
        ]),
      );
    }
  }
}

function graph(title: string, left: IMetric[], width = WIDTH / 3): GraphWidget {
  return new GraphWidget({ title, left, width, height: HEIGHT });
}
