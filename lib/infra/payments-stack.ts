import { CfnOutput, Duration, Stack, type StackProps, Tags, Validations } from 'aws-cdk-lib';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { metricsNamespace } from '../metrics/definitions';
import { DATABASE_NAME, DATABASE_SCHEMA, type DatabaseRole, databaseUserName } from '../tables/postgres-access';
import { OperationalAlarms } from './alarms';
import { PaymentsApi } from './api';
import { ApprovalWorkflow } from './approval-workflow';
import { OperationsDashboard } from './dashboard';
import { PaymentsDatabase, POSTGRES_PORT } from './database';
import type { EnvironmentConfig } from './environments';
import { ApiFirewall } from './firewall';
import { FunctionEnv, type FunctionSpec, serviceFunctions } from './functions';
import { PaymentsHttpApi } from './http-api';
import { assertLimits } from './limits';
import { ServiceNetwork } from './network';
import { ServiceFunction } from './service-function';
import { publishedMetrics } from './service-metrics';
import { SettlementQueue } from './settlement-queue';
import { DataTables } from './tables';
import { assertTiming, functionTimeoutSeconds } from './timing';

export interface PaymentsStackProps extends StackProps {
  readonly config: EnvironmentConfig;
  /** The functions to deploy; `serviceFunctions` unless a test swaps them. */
  readonly functions?: readonly FunctionSpec[];
}

/** Each function's own database role: its database user, with the privileges its spec declares. */
export function databaseRoles(specs: readonly FunctionSpec[]): DatabaseRole[] {
  return specs.map((spec) => ({ name: databaseUserName(spec.id), grants: spec.sql }));
}

/**
 * The payments service in one environment: its data (DynamoDB tables, or on `store: 'postgres'` an Aurora cluster
 * behind RDS Proxy in a VPC), functions, API, settlement queue, webhook secret and alarms. Synthesis fails, before
 * anything is built, when the environment's timeouts break exactly-once processing.
 */
export class PaymentsStack extends Stack {
  /** On PostgreSQL: the VPC, the cluster and the proxy (no DynamoDB table is created). */
  readonly database?: PaymentsDatabase;
  readonly network?: ServiceNetwork;
  readonly settlement: SettlementQueue;
  readonly webhookSecret: Secret;
  readonly functions: ReadonlyMap<string, ServiceFunction>;
  /** The durable refund approval; on the DynamoDB store only. */
  readonly approvalWorkflow?: ApprovalWorkflow;
  /** The REST API, or the HTTP API where the environment asks for one (`api: 'http'`). */
  readonly api: PaymentsApi | PaymentsHttpApi;
  readonly alarms: OperationalAlarms;
  readonly dashboard: OperationsDashboard;
  private readonly dynamoDbTables?: DataTables;

  /** The DynamoDB tables; a stack on PostgreSQL has none. */
  get tables(): DataTables {
    if (!this.dynamoDbTables)
      throw new Error(`${this.stackName} keeps its data in PostgreSQL: it has no DynamoDB table`);
    return this.dynamoDbTables;
  }

  constructor(scope: Construct, id: string, props: PaymentsStackProps) {
    const { config, functions: specs = serviceFunctions, ...stackProps } = props;
    assertTiming(config, specs);
    assertLimits(config, specs);
    super(scope, id, {
      stackName: config.stackName,
      description: `Keystone payments service (${config.name})`,
      terminationProtection: config.terminationProtection,
      env: config.account || config.region ? { account: config.account, region: config.region } : undefined,
      ...stackProps,
    });
    for (const [key, value] of Object.entries(config.tags)) Tags.of(this).add(key, value);

    if (config.store === 'postgres') {
      this.network = new ServiceNetwork(this, 'Network', config);
      this.database = new PaymentsDatabase(this, 'Database', {
        config,
        vpc: this.network.vpc,
        roles: databaseRoles(specs),
      });
    } else {
      this.dynamoDbTables = new DataTables(this, 'Tables', config);
    }
    this.settlement = new SettlementQueue(this, 'Settlement', config);
    this.webhookSecret = new Secret(this, 'ProcessorWebhookSecret', {
      description:
        `Key the payment processor signs webhooks with (${config.name}). Created with a random value: replace it ` +
        'with the key from the processor dashboard (aws secretsmanager put-secret-value).',
      removalPolicy: config.removalPolicy,
    });
    Validations.of(this.webhookSecret).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'The payment processor issues this signing key and rotates it in its own dashboard; the new key is then ' +
        'written here. There is no API a Secrets Manager rotation function could call to rotate it.',
    });

    const functions = new Map<string, ServiceFunction>();
    for (const spec of specs) {
      const service = new ServiceFunction(this, spec.id, {
        spec,
        timeoutSeconds: functionTimeoutSeconds(spec, config),
        config,
        environment: this.environmentFor(spec, config),
        network: this.database?.networkFor(spec.id),
      });
      // Nothing runs against a schema that isn't there yet (the completer's schedule starts with the stack).
      if (this.database) service.node.addDependency(this.database.migrationResource);
      this.grant(spec, service);
      functions.set(spec.id, service);
    }
    this.functions = functions;

    const authorizers = specs.filter((spec) => spec.trigger.kind === 'authorizer');
    if (authorizers.length > 1) throw new Error(`One authorizer per API, got ${authorizers.map((s) => s.id)}`);
    const apiProps = {
      config,
      routes: specs.flatMap((spec) =>
        spec.trigger.kind === 'route' ? [{ id: spec.id, trigger: spec.trigger, handler: this.fn(spec) }] : [],
      ),
      authorizer: authorizers[0] && this.fn(authorizers[0]),
    };
    if (config.api === 'http') {
      // WAF can't be attached to an HTTP API: the stage throttle is its only rate limit.
      this.api = new PaymentsHttpApi(this, 'HttpApi', apiProps);
      new CfnOutput(this, 'HttpApiUrl', { value: this.api.url, description: "The HTTP API's base URL" });
    } else {
      this.api = new PaymentsApi(this, 'Api', apiProps);
      new ApiFirewall(this, 'Firewall', {
        stage: this.api.api.deploymentStage,
        config,
        exemptFromIpLimit: specs.flatMap(({ trigger }) =>
          trigger.kind === 'route' && trigger.exemptFromIpRateLimit ? [trigger] : [],
        ),
      });
    }

    for (const spec of specs) {
      if (spec.trigger.kind !== 'schedule') continue;
      new Rule(this, `${spec.id}Schedule`, {
        description: `Runs ${spec.id} every ${config.idempotency.recoveryPeriodMinutes} minute(s)`,
        schedule: Schedule.rate(Duration.minutes(config.idempotency.recoveryPeriodMinutes)),
        // No retries of a failed run: the next one comes within the period, and finds the same work due.
        targets: [new LambdaFunction(this.fn(spec), { retryAttempts: 0 })],
      });
    }

    for (const spec of specs) {
      if (spec.trigger.kind !== 'settlement-queue') continue;
      this.fn(spec).addEventSource(
        new SqsEventSource(this.settlement.queue, {
          batchSize: spec.trigger.batchSize,
          // A failed message is retried alone; the rest of the batch is deleted, not reprocessed.
          reportBatchItemFailures: true,
          // A backlog drains at this pace and leaves the account's concurrency to the API's functions. Messages
          // beyond it wait in the queue without being received, so they burn no receive count towards the DLQ.
          maxConcurrency: config.concurrency.settlementMaxConcurrency,
        }),
      );
    }

    // The refund approval, a Lambda durable function, on the DynamoDB store (keystone-idempotency/durable).
    if (!this.database) {
      this.approvalWorkflow = new ApprovalWorkflow(this, 'ApprovalWorkflow', {
        config,
        idempotency: this.tables.idempotency,
      });
    }

    const monitored = {
      config,
      functions: specs.map((spec) => ({ id: spec.id, function: this.fn(spec) })),
      published: publishedMetrics(specs),
      queue: this.settlement.queue,
      deadLetterQueue: this.settlement.deadLetterQueue,
      api: this.api.api,
      database: this.database,
    };
    this.alarms = new OperationalAlarms(this, 'Alarms', monitored);
    this.dashboard = new OperationsDashboard(this, 'Operations', monitored);
    new CfnOutput(this, 'AlarmTopicArn', {
      value: this.alarms.topic.topicArn,
      description: 'Every alarm of this environment is sent here; subscribe a pager or an address to it',
    });

    // The REST API's URL is an output already: RestApi adds one (ApiEndpoint...); the HTTP API's is HttpApiUrl.
    new CfnOutput(this, 'WebhookSecretArn', {
      value: this.webhookSecret.secretArn,
      description: 'Put the processor signing key here before the first webhook arrives',
    });
  }

  private fn(spec: FunctionSpec) {
    const service = this.functions.get(spec.id);
    if (!service) throw new Error(`No function '${spec.id}'`);
    return service.function;
  }

  private environmentFor(spec: FunctionSpec, config: EnvironmentConfig): Record<string, string> {
    const environment: Record<string, string> = {
      [FunctionEnv.serviceName]: 'payments',
      // The alarms and the dashboard read the same namespace (lib/metrics/definitions.ts).
      [FunctionEnv.metricsNamespace]: metricsNamespace(config.name),
      [FunctionEnv.logLevel]: config.logLevel,
      [FunctionEnv.leaseSeconds]: String(config.idempotency.leaseSeconds),
      [FunctionEnv.ttlSeconds]: String(config.idempotency.ttlSeconds),
    };
    if (this.database) {
      Object.assign(environment, {
        [FunctionEnv.store]: 'postgres',
        [FunctionEnv.databaseHost]: this.database.proxy.endpoint,
        [FunctionEnv.databasePort]: String(POSTGRES_PORT),
        [FunctionEnv.databaseName]: DATABASE_NAME,
        [FunctionEnv.databaseUser]: databaseUserName(spec.id),
        [FunctionEnv.databaseSchema]: DATABASE_SCHEMA,
        // RDS Proxy pins a session that prepares a statement, which would undo its multiplexing.
        [FunctionEnv.databasePreparedStatements]: 'false',
      });
    } else {
      for (const { table } of spec.tables) environment[table.envVar] = this.tables.get(table).tableName;
    }
    if (spec.sendsSettlements || spec.movesSettlements) {
      environment[FunctionEnv.settlementQueueUrl] = this.settlement.queue.queueUrl;
    }
    if (spec.movesSettlements) {
      environment[FunctionEnv.settlementDeadLetterUrl] = this.settlement.deadLetterQueue.queueUrl;
    }
    if (spec.readsWebhookSecret) environment[FunctionEnv.webhookSecretArn] = this.webhookSecret.secretArn;
    const { timeouts } = config;
    if (spec.calls?.includes('processor')) {
      environment[FunctionEnv.processorUrl] = config.processorUrl;
      environment[FunctionEnv.processorTimeoutMs] = String(timeouts.processorMilliseconds);
    }
    if (spec.calls?.includes('mailer')) {
      environment[FunctionEnv.mailerUrl] = config.mailerUrl;
      environment[FunctionEnv.mailerTimeoutMs] = String(timeouts.mailerMilliseconds);
    }
    if (spec.calls?.includes('warehouse')) {
      environment[FunctionEnv.warehouseUrl] = config.warehouseUrl;
      environment[FunctionEnv.warehouseTimeoutMs] = String(timeouts.warehouseMilliseconds);
      environment[FunctionEnv.warehouseProcessingWindowMs] = String(timeouts.warehouseProcessingWindowMilliseconds);
    }
    return environment;
  }

  /** Exactly the spec's permissions, each action named, on its one resource. */
  private grant(spec: FunctionSpec, service: ServiceFunction): void {
    // On PostgreSQL, one permission covers the data: connecting through the proxy as the function's own user, whose
    // privileges in the database are the spec's `sql` (the migration function grants them).
    if (this.database) this.database.grantConnect(service.role, databaseUserName(spec.id));
    for (const access of this.database ? [] : spec.tables) {
      if ('engine' in access) {
        // The engine's table grants what the engine does, as the library's construct defines it.
        const { idempotency } = this.tables;
        if (access.engine === 'operations') idempotency.grantOperations(service.role);
        else idempotency.grantRecovery(service.role);
        continue;
      }
      const { table, actions, queries = [] } = access;
      const { tableArn } = this.tables.get(table);
      service.role.addToPrincipalPolicy(
        new PolicyStatement({ actions: actions.map((action) => `dynamodb:${action}`), resources: [tableArn] }),
      );
      // Query on the named indexes only: an index holds the keys of a few items, the table all of them.
      if (queries.length > 0) {
        service.role.addToPrincipalPolicy(
          new PolicyStatement({
            actions: ['dynamodb:Query'],
            resources: queries.map((index) => `${tableArn}/index/${index}`),
          }),
        );
      }
    }
    // Written out rather than grantSendMessages/grantRead, which add GetQueueUrl, GetQueueAttributes and
    // DescribeSecret: the functions get the queue URL and the secret ARN from their environment.
    if (spec.sendsSettlements) {
      service.role.addToPrincipalPolicy(
        new PolicyStatement({ actions: ['sqs:SendMessage'], resources: [this.settlement.queue.queueArn] }),
      );
    }
    if (spec.movesSettlements) {
      service.role.addToPrincipalPolicy(
        new PolicyStatement({ actions: ['sqs:SendMessage'], resources: [this.settlement.deadLetterQueue.queueArn] }),
      );
    }
    if (spec.readsWebhookSecret) {
      service.role.addToPrincipalPolicy(
        new PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [this.webhookSecret.secretArn] }),
      );
    }
  }
}
