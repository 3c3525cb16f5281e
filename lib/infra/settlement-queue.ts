import { Duration } from 'aws-cdk-lib';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { EnvironmentConfig } from './environments';
import { SETTLEMENT_MAX_RECEIVE_COUNT, settlementVisibilityTimeoutSeconds } from './timing';

/**
 * The settlement queue, fed by the webhook receiver and drained by the settlement consumer, and its dead-letter
 * queue. Both use SQS-managed encryption (no KMS key to pay for or to grant) and refuse requests without TLS.
 */
export class SettlementQueue extends Construct {
  readonly queue: Queue;
  readonly deadLetterQueue: Queue;

  constructor(scope: Construct, id: string, config: EnvironmentConfig) {
    super(scope, id);
    this.deadLetterQueue = new Queue(this, 'DeadLetters', {
      // A message keeps its original enqueue time when it moves here, so this must outlast the source retention
      // (4 days) by enough to notice the alarm, fix the cause and redrive: the SQS maximum.
      retentionPeriod: Duration.days(14),
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      removalPolicy: config.removalPolicy,
    });
    this.queue = new Queue(this, 'Queue', {
      visibilityTimeout: Duration.seconds(settlementVisibilityTimeoutSeconds(config)),
      retentionPeriod: Duration.days(4),
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: SETTLEMENT_MAX_RECEIVE_COUNT },
      removalPolicy: config.removalPolicy,
    });
  }
}
