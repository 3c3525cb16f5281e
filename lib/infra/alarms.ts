import { Duration, Stack } from 'aws-cdk-lib';
import {
  Alarm,
  ComparisonOperator,
  type IAlarmAction,
  type IMetric,
  MathExpression,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { PolicyStatement, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { EmailSubscription, UrlSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { MetricService, RecoveryBacklogMetric } from '../metrics/definitions';
import type { ApiMetrics } from './api';
import type { PaymentsDatabase } from './database';
import type { AlarmSubscription, EnvironmentConfig } from './environments';
import { type PublishedMetrics, serviceMetric } from './service-metrics';

export interface OperationalAlarmsProps {
  readonly config: EnvironmentConfig;
  readonly functions: readonly { readonly id: string; readonly function: IFunction }[];
  readonly queue: IQueue;
  readonly deadLetterQueue: IQueue;
  readonly api: ApiMetrics;
  /** Every function's own metrics: each outcome alarm in the environment's settings is raised for each emitter. */
  readonly published: readonly PublishedMetrics[];
  /** On PostgreSQL: the cluster's and the proxy's metrics. */
  readonly database?: DatabaseMetrics;
}

/** What the alarms and the dashboard read of the database. */
export type DatabaseMetrics = Pick<PaymentsDatabase, 'metricProxy' | 'metricCluster'>;

/**
 * The alarms someone must act on, all sent (with their recovery) to the environment's alarm topic:
 *
 * - a function failing or throttled;
 * - a settlement still not done after a few retries (the queue's oldest message), and one given up on (any message
 *   in the dead-letter queue is a payment that was charged and never settled);
 * - idempotency outcomes that mean trouble (leases lost, takeovers: `config.alarms.idempotency`), per function;
 * - payments whose client never came back waiting too long for the completer (it falls behind, or is not running);
 * - the API answering 5xx to more than a set share of requests;
 * - on PostgreSQL: the proxy's pool nearly full, the cluster's connections near `max_connections`, and deadlocks.
 *
 * Lists in, alarms out: a new function, or a new metric in a function's spec and an entry in the environment's
 * `alarms.idempotency`, is alarmed on without touching this construct.
 */
export class OperationalAlarms extends Construct {
  readonly alarms: Alarm[] = [];
  readonly topic: Topic;

  constructor(scope: Construct, id: string, props: OperationalAlarmsProps) {
    super(scope, id);
    const { config, functions, queue, deadLetterQueue, api, published, database } = props;
    const period = Duration.minutes(config.alarms.periodMinutes);
    const prefix = Stack.of(this).stackName;

    for (const { id: functionId, function: fn } of functions) {
      this.add(`${functionId}Errors`, {
        alarmName: `${prefix} ${functionId} errors`,
        metric: fn.metricErrors({ period, statistic: 'Sum' }),
        threshold: config.alarms.functionErrors,
      });
      this.add(`${functionId}Throttles`, {
        alarmName: `${prefix} ${functionId} throttles`,
        metric: fn.metricThrottles({ period, statistic: 'Sum' }),
        threshold: config.alarms.functionThrottles,
      });
    }
    this.add('SettlementAge', {
      alarmName: `${prefix} settlement delayed`,
      alarmDescription:
        'A settlement has waited this long in the queue: it failed at least twice and heads for the dead-letter ' +
        'queue unless what fails it (the mailer, the payments table) recovers.',
      metric: queue.metricApproximateAgeOfOldestMessage({ period: Duration.minutes(1), statistic: 'Maximum' }),
      threshold: config.alarms.settlementAgeSeconds,
    });
    this.add('SettlementDeadLetters', {
      alarmName: `${prefix} settlement dead letters`,
      metric: deadLetterQueue.metricApproximateNumberOfMessagesVisible({
        period: Duration.minutes(1),
        statistic: 'Maximum',
      }),
      // One message is one too many: > 0, whatever the environment.
      threshold: 0,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
    });
    for (const { functionId, service, names } of published) {
      for (const outcome of config.alarms.idempotency) {
        if (!names.includes(outcome.metric)) continue;
        this.add(`${functionId}${outcome.metric}`, {
          alarmName: `${prefix} ${functionId} ${outcome.metric}`,
          alarmDescription: outcome.meaning,
          metric: serviceMetric(config, service, outcome.metric, period),
          threshold: outcome.threshold,
        });
      }
    }
    this.add('RecoveryBacklogAge', {
      alarmName: `${prefix} payment recovery behind`,
      alarmDescription:
        'A payment whose client never came back has waited this long for the completer after a run: the completer ' +
        'is falling behind (more such payments than its runs get through: a processor outage, or clients losing ' +
        'answers) or not running (no run published the metric). Nothing expires meanwhile; the payments are recorded ' +
        'late. Check the completer for errors, throttles and timeouts, and the processor lookup latency.',
      metric: serviceMetric(config, MetricService.recovery, RecoveryBacklogMetric.oldestDueAge, period).with({
        statistic: 'Maximum',
      }),
      threshold: config.alarms.recoveryBacklogAgeSeconds,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      // Every completer run publishes it, 0 when it left nothing: no data means no run got to the end.
      treatMissingData: TreatMissingData.BREACHING,
    });
    const { percent, minRequests } = config.alarms.api5xx;
    this.add('Api5xxRate', {
      alarmName: `${prefix} API 5xx rate`,
      alarmDescription: `More than ${percent}% of API requests answered 5xx (counted from ${minRequests} requests).`,
      metric: new MathExpression({
        label: 'API 5xx (% of requests)',
        expression: `IF(requests >= ${minRequests}, 100 * errors / requests, 0)`,
        usingMetrics: {
          errors: api.metricServerError({ period, statistic: 'Sum' }),
          requests: api.metricCount({ period, statistic: 'Sum' }),
        },
        period,
      }),
      threshold: percent,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
    });

    if (database) this.addDatabaseAlarms(prefix, config, database, period);

    this.topic = new Topic(this, 'Topic', { displayName: `${prefix} alarms`, enforceSSL: true });
    for (const subscription of config.alarms.subscriptions) this.topic.addSubscription(subscribe(subscription));
    // CloudWatch publishes as its service principal; the topic policy (which enforceSSL creates) must let it, and
    // only for this account's alarms.
    const { account, region, partition } = Stack.of(this);
    this.topic.addToResourcePolicy(
      new PolicyStatement({
        principals: [new ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['sns:Publish'],
        resources: [this.topic.topicArn],
        conditions: {
          StringEquals: { 'aws:SourceAccount': account },
          ArnLike: { 'aws:SourceArn': `arn:${partition}:cloudwatch:${region}:${account}:alarm:*` },
        },
      }),
    );
    const action: IAlarmAction = new SnsAction(this.topic);
    for (const alarm of this.alarms) {
      alarm.addAlarmAction(action);
      alarm.addOkAction(action);
    }
  }

  private addDatabaseAlarms(prefix: string, config: EnvironmentConfig, database: DatabaseMetrics, period: Duration) {
    const thresholds = config.alarms.database;
    const pool = {
      connections: database.metricProxy('DatabaseConnections', { period }),
      allowed: database.metricProxy('MaxDatabaseConnectionsAllowed', { period }),
    };
    this.add('DatabaseProxyConnections', {
      alarmName: `${prefix} database proxy connections`,
      alarmDescription:
        `RDS Proxy holds more than ${thresholds.proxyConnectionsPercent}% of the database connections it may open: ` +
        `requests will soon wait for one, and fail after ${config.database.proxy.borrowTimeoutSeconds}s. Look for ` +
        'pinned connections on the dashboard, and raise the cluster maximum capacity (it sets max_connections).',
      metric: new MathExpression({
        label: 'proxy connections (% of allowed)',
        expression: 'IF(allowed > 0, 100 * connections / allowed, 0)',
        usingMetrics: pool,
        period,
      }),
      threshold: thresholds.proxyConnectionsPercent,
    });
    // The proxy may open maxConnectionsPercent of max_connections: what it reports allowed gives max_connections.
    const share = config.database.proxy.maxConnectionsPercent / 100;
    this.add('DatabaseClusterConnections', {
      alarmName: `${prefix} database connections`,
      alarmDescription:
        `The cluster holds more than ${thresholds.clusterConnectionsPercent}% of its max_connections (estimated from ` +
        "the proxy's allowance): new connections, the proxy's included, will be refused. Something connects around " +
        'the proxy (only the migration function and operators should), or the capacity is too low.',
      metric: new MathExpression({
        label: 'cluster connections (% of max_connections)',
        expression: `IF(allowed > 0, 100 * cluster * ${share} / allowed, 0)`,
        usingMetrics: {
          cluster: database.metricCluster('DatabaseConnections', { period, statistic: 'Maximum' }),
          allowed: pool.allowed,
        },
        period,
      }),
      threshold: thresholds.clusterConnectionsPercent,
    });
    this.add('DatabaseDeadlocks', {
      alarmName: `${prefix} database deadlocks`,
      alarmDescription:
        "Transactions deadlocked. The service's transactions lock a key's row first and their own rows after, so " +
        'they should never deadlock: the store retried these (no payment was lost), but something else takes locks ' +
        'in another order. The PostgreSQL log names the statements.',
      metric: database.metricCluster('Deadlocks', { period, statistic: 'Maximum' }),
      threshold: thresholds.deadlocks,
    });
  }

  private add(
    id: string,
    props: {
      alarmName: string;
      alarmDescription?: string;
      metric: IMetric;
      threshold: number;
      comparisonOperator?: ComparisonOperator;
      treatMissingData?: TreatMissingData;
    },
  ): void {
    this.alarms.push(
      new Alarm(this, id, {
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: 1,
        // No invocations means no errors: missing data must not leave the alarm in INSUFFICIENT_DATA.
        treatMissingData: TreatMissingData.NOT_BREACHING,
        ...props,
      }),
    );
  }
}

function subscribe(subscription: AlarmSubscription) {
  switch (subscription.protocol) {
    case 'email':
      return new EmailSubscription(subscription.address);
    case 'https':
      return new UrlSubscription(subscription.url);
  }
}
