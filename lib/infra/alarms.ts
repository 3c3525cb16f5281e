import { Duration, Stack } from 'aws-cdk-lib';
import type { RestApi } from 'aws-cdk-lib/aws-apigateway';
import {
  Alarm,
  ComparisonOperator,
  type IAlarmAction,
  type IMetric,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { PolicyStatement, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { EnvironmentConfig } from './environments';

export interface OperationalAlarmsProps {
  readonly config: EnvironmentConfig;
  readonly functions: readonly { readonly id: string; readonly function: IFunction }[];
  readonly deadLetterQueue: IQueue;
  readonly api: RestApi;
}

/**
 * The alarms someone must act on: a function failing or throttled, a settlement given up on (any message in the
 * dead-letter queue is a payment that was charged and never settled), and the API answering 5xx.
 *
 * With `alarmEmail` set, alarms (and their recovery) are sent to an SNS topic with that address subscribed.
 */
export class OperationalAlarms extends Construct {
  readonly alarms: Alarm[] = [];
  readonly topic?: Topic;

  constructor(scope: Construct, id: string, { config, functions, deadLetterQueue, api }: OperationalAlarmsProps) {
    super(scope, id);
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
    this.add('Api5xx', {
      alarmName: `${prefix} API 5xx`,
      metric: api.metricServerError({ period, statistic: 'Sum' }),
      threshold: config.alarms.api5xx,
    });

    if (config.alarmEmail) {
      this.topic = new Topic(this, 'Topic', { displayName: `${prefix} alarms`, enforceSSL: true });
      this.topic.addSubscription(new EmailSubscription(config.alarmEmail));
      // CloudWatch publishes as its service principal; the topic policy (which enforceSSL creates) must let it,
      // and only for this account's alarms.
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
  }

  private add(
    id: string,
    props: {
      alarmName: string;
      metric: IMetric;
      threshold: number;
      comparisonOperator?: ComparisonOperator;
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
