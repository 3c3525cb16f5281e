import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { App, type CfnResource } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { RECOVERY_INDEX, TTL_ATTRIBUTE } from 'keystone-idempotency/dynamodb';
import { AUTHORIZATION_HEADER_PATTERN, PaymentsApi } from '../../lib/infra/api';
import { environments } from '../../lib/infra/environments';
import { serviceFunctions } from '../../lib/infra/functions';
import { PaymentsStack } from '../../lib/infra/payments-stack';
import { THROTTLED_INTEGRATION } from '../../lib/infra/throttling';
import { IdempotencyMetric, MetricService, RecoveryBacklogMetric } from '../../lib/metrics/definitions';
import { serviceMetrics } from '../../lib/runtime/metrics';
import { idempotencyTable, paymentsTable, tableDefinitions } from '../../lib/tables/definitions';
import { STORE_WRITES_MARGIN_MS } from '../../lib/timing/timing';
import {
  CDK_JSON_CONTEXT,
  type CfnResourceJson,
  resourceOf,
  type SynthesizedApp,
  synthesize,
  TESTED_ENVIRONMENTS,
} from './synth';

/**
 * The brief's access table, written out here rather than read from `functions.ts`, so that a change to a function's
 * permissions has to change this test too.
 */
const ENGINE = ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'];
const DYNAMODB_ACCESS: Record<string, Partial<Record<'Idempotency' | 'RecoveryIndex' | 'Payments', string[]>>> = {
  PaymentsCreate: {
    Idempotency: ENGINE,
    Payments: ['dynamodb:ConditionCheckItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
  },
  PaymentsGet: { Payments: ['dynamodb:GetItem'] },
  // Orders live in the service's data table: the stock is read before it is reserved, the rest is written in steps.
  OrdersCreate: {
    Idempotency: ENGINE,
    Payments: ['dynamodb:ConditionCheckItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
  },
  OrdersGet: { Payments: ['dynamodb:GetItem'] },
  InventoryGet: { Payments: ['dynamodb:GetItem'] },
  Authorizer: { Payments: ['dynamodb:GetItem'] },
  WebhookReceiver: { Idempotency: ENGINE },
  SettlementConsumer: {
    Idempotency: ENGINE,
    Payments: ['dynamodb:ConditionCheckItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
  },
  // Finds due operations through the recovery index alone: Query is granted on the index, never on the table.
  PaymentsCompleter: {
    Idempotency: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
    RecoveryIndex: ['dynamodb:Query'],
    Payments: ['dynamodb:ConditionCheckItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
  },
};
const FUNCTION_IDS = Object.keys(DYNAMODB_ACCESS);

let synthesized: SynthesizedApp;
beforeAll(() => {
  synthesized = synthesize({ bundle: true });
});
afterAll(() => synthesized?.dispose());

function each(check: (stack: PaymentsStack, template: Template) => void): void {
  for (const env of TESTED_ENVIRONMENTS) check(synthesized.stacks[env], synthesized.templates[env]);
}

/** The REST API, which every environment has as configured. */
function restApiOf(stack: PaymentsStack) {
  if (!(stack.api instanceof PaymentsApi)) throw new Error(`${stack.stackName} has no REST API`);
  return stack.api.api;
}

function l1(construct: { node: { defaultChild?: unknown } }): CfnResource {
  return construct.node.defaultChild as CfnResource;
}

function functionResource(stack: PaymentsStack, template: Template, id: string): CfnResourceJson {
  const service = stack.functions.get(id);
  if (!service) throw new Error(`no function ${id}`);
  return resourceOf(template, stack, l1(service.function));
}

function environmentOf(fn: CfnResourceJson): Record<string, unknown> {
  return (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
}

interface Statement {
  readonly Effect: string;
  readonly Action: string | string[];
  readonly Resource: unknown;
}

/** Every statement of every policy attached to a function's role. */
function statementsOf(stack: PaymentsStack, template: Template, id: string): Statement[] {
  const roleId = stack.getLogicalId(l1(stack.functions.get(id)!.role));
  return Object.values(template.findResources('AWS::IAM::Policy'))
    .filter((policy) => JSON.stringify(policy.Properties.Roles).includes(`"${roleId}"`))
    .flatMap((policy) => policy.Properties.PolicyDocument.Statement as Statement[]);
}

/** Actions per resource (as template JSON), for a role's Allow statements, X-Ray excluded. */
function actionsByResource(statements: Statement[]): Record<string, string[]> {
  const result: Record<string, string[]> = {};
  for (const statement of statements) {
    expect(statement.Effect).toBe('Allow');
    const actions = ([] as string[]).concat(statement.Action).filter((action) => !action.startsWith('xray:'));
    if (actions.length === 0) continue;
    for (const resource of ([] as unknown[]).concat(statement.Resource)) {
      const key = JSON.stringify(resource);
      result[key] = [...(result[key] ?? []), ...actions].sort();
    }
  }
  return result;
}

describe('PaymentsStack', () => {
  describe('tables', () => {
    it('gives the idempotency table the sparse recovery index, keys only: recovery never scans', () => {
      each((stack, template) => {
        const table = resourceOf(template, stack, l1(stack.tables.get(idempotencyTable)));
        expect(table.Properties.GlobalSecondaryIndexes).toEqual([
          {
            IndexName: RECOVERY_INDEX,
            KeySchema: [
              { AttributeName: 'recoveryShard', KeyType: 'HASH' },
              { AttributeName: 'recoverAt', KeyType: 'RANGE' },
            ],
            Projection: { ProjectionType: 'KEYS_ONLY' },
          },
        ]);
        expect(table.Properties.AttributeDefinitions).toEqual(
          expect.arrayContaining([
            { AttributeName: 'recoveryShard', AttributeType: 'S' },
            { AttributeName: 'recoverAt', AttributeType: 'N' },
          ]),
        );
      });
    });

    it('builds both tables from the shared definitions', () => {
      each((stack, template) => {
        for (const definition of tableDefinitions) {
          const table = resourceOf(template, stack, l1(stack.tables.get(definition)));
          const keys = [definition.partitionKey, ...(definition.sortKey ? [definition.sortKey] : [])];
          expect(table.Properties.KeySchema).toEqual(
            keys.map((key, index) => ({ AttributeName: key.name, KeyType: index === 0 ? 'HASH' : 'RANGE' })),
          );
        }
      });
    });

    it("expires idempotency records on the engine's TTL attribute", () => {
      expect(idempotencyTable.ttlAttribute).toBe(TTL_ATTRIBUTE);
      each((stack, template) => {
        const table = resourceOf(template, stack, l1(stack.tables.get(idempotencyTable)));
        expect(table.Properties.TimeToLiveSpecification).toEqual({ AttributeName: TTL_ATTRIBUTE, Enabled: true });
      });
    });

    it('bills on demand, with point-in-time recovery and AWS-managed encryption', () => {
      each((_, template) => {
        template.resourceCountIs('AWS::DynamoDB::Table', tableDefinitions.length);
        template.allResourcesProperties('AWS::DynamoDB::Table', {
          BillingMode: 'PAY_PER_REQUEST',
          PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
          // SSEEnabled without a key: the AWS managed key (aws/dynamodb).
          SSESpecification: { SSEEnabled: true, KMSMasterKeyId: Match.absent() },
        });
      });
    });

    it('retains the tables behind deletion protection in prod, and deletes them in dev', () => {
      const { dev, prod } = synthesized.templates;
      prod.allResources('AWS::DynamoDB::Table', {
        DeletionPolicy: 'Retain',
        UpdateReplacePolicy: 'Retain',
        Properties: Match.objectLike({ DeletionProtectionEnabled: true }),
      });
      dev.allResources('AWS::DynamoDB::Table', {
        DeletionPolicy: 'Delete',
        Properties: Match.objectLike({ DeletionProtectionEnabled: false }),
      });
    });

    it("keeps the rest of prod's state too (queues, secret, logs), and lets dev's go", () => {
      const stateful = ['AWS::SQS::Queue', 'AWS::SecretsManager::Secret', 'AWS::Logs::LogGroup'];
      for (const type of stateful) {
        synthesized.templates.prod.allResources(type, { DeletionPolicy: 'Retain' });
        synthesized.templates.dev.allResources(type, { DeletionPolicy: 'Delete' });
      }
    });
  });

  describe('functions', () => {
    it('deploys exactly the declared functions, on nodejs22.x and arm64', () => {
      each((stack, template) => {
        // And, on the DynamoDB store, the durable refund approval (test/infra/approval-workflow.test.ts).
        template.resourceCountIs('AWS::Lambda::Function', FUNCTION_IDS.length + (stack.approvalWorkflow ? 1 : 0));
        for (const id of FUNCTION_IDS) {
          const fn = functionResource(stack, template, id);
          expect(fn.Properties.Runtime).toBe('nodejs22.x');
          expect(fn.Properties.Architectures).toEqual(['arm64']);
          expect(environmentOf(fn).NODE_OPTIONS).toBe('--enable-source-maps');
        }
      });
    });

    it('bundles each handler as a minified ES module with the createRequire banner and a source map', () => {
      const { stacks, templates, outdir } = synthesized;
      for (const id of FUNCTION_IDS) {
        const fn = functionResource(stacks.prod, templates.prod, id);
        // The asset's S3 key is its hash; the cloud assembly stages it in asset.<hash>.
        const { S3Key } = fn.Properties.Code as { S3Key: string };
        const bundle = path.join(outdir, `asset.${S3Key.replace(/\.zip$/, '')}`);
        const code = readFileSync(path.join(bundle, 'index.mjs'), 'utf8');
        expect(code.startsWith("import { createRequire } from 'node:module'; const require = createRequire(")).toBe(
          true,
        );
        expect(existsSync(path.join(bundle, 'index.mjs.map'))).toBe(true);
        // Minified: thousands of characters per line (an unminified bundle averages under 40).
        expect(code.length / code.split('\n').length).toBeGreaterThan(1000);
        expect(fn.Properties.Handler).toBe('index.handler');
      }
    });

    it('keeps the OpenAPI generator out of every bundle: the document is built by the local stack or a script', () => {
      const { stacks, templates, outdir } = synthesized;
      for (const id of FUNCTION_IDS) {
        const { S3Key } = functionResource(stacks.prod, templates.prod, id).Properties.Code as { S3Key: string };
        const map = readFileSync(path.join(outdir, `asset.${S3Key.replace(/\.zip$/, '')}`, 'index.mjs.map'), 'utf8');
        const sources = (JSON.parse(map) as { sources: string[] }).sources;
        expect(sources.some((source) => source.includes('functions/'))).toBe(true); // the map names real inputs
        expect(sources.filter((source) => /lib\/openapi\/|openapi3-ts|@redocly/.test(source))).toEqual([]);
      }
    });

    it('keeps the sandbox out of every bundle: its injected faults can never run in a deployed function', () => {
      const { stacks, templates, outdir } = synthesized;
      for (const id of FUNCTION_IDS) {
        const { S3Key } = functionResource(stacks.prod, templates.prod, id).Properties.Code as { S3Key: string };
        const map = readFileSync(path.join(outdir, `asset.${S3Key.replace(/\.zip$/, '')}`, 'index.mjs.map'), 'utf8');
        const sources = (JSON.parse(map) as { sources: string[] }).sources;
        expect({ id, sandbox: sources.filter((source) => source.includes('lib/sandbox/')) }).toEqual({
          id,
          sandbox: [],
        });
      }
    });

    it('bundles the tracer (and the X-Ray SDK) only where tracing is on: prod, not dev', () => {
      const { stacks, templates, outdir } = synthesized;
      const bundleOf = (env: (typeof TESTED_ENVIRONMENTS)[number], id: string) => {
        const { S3Key } = functionResource(stacks[env], templates[env], id).Properties.Code as { S3Key: string };
        return readFileSync(path.join(outdir, `asset.${S3Key.replace(/\.zip$/, '')}`, 'index.mjs'), 'utf8');
      };
      for (const id of FUNCTION_IDS) {
        // aws-xray-sdk-core's name for the middleware it adds to each captured AWS SDK client.
        expect(bundleOf('prod', id)).toContain('XRaySDKInstrumentation');
        expect(bundleOf('dev', id)).not.toContain('XRaySDKInstrumentation');
        expect(bundleOf('dev', id)).not.toContain('@aws-lambda-powertools/tracer');
        expect(environmentOf(functionResource(stacks.prod, templates.prod, id)).POWERTOOLS_TRACE_ENABLED).toBe('true');
        expect(environmentOf(functionResource(stacks.dev, templates.dev, id)).POWERTOOLS_TRACE_ENABLED).toBe('false');
      }
    });

    it('gives each function its own log group, kept as long as the environment says', () => {
      const retention = { dev: 7, prod: 365 };
      for (const env of TESTED_ENVIRONMENTS) {
        const stack = synthesized.stacks[env];
        const template = synthesized.templates[env];
        for (const id of FUNCTION_IDS) {
          const service = stack.functions.get(id)!;
          const fn = functionResource(stack, template, id);
          const logGroupId = stack.getLogicalId(l1(service.logGroup));
          expect(fn.Properties.LoggingConfig).toEqual({ LogGroup: { Ref: logGroupId } });
          expect(resourceOf(template, stack, l1(service.logGroup)).Properties.RetentionInDays).toBe(retention[env]);
        }
      }
    });

    it('reserves concurrency for the authorizer and the payments function in prod, and for nothing in dev', () => {
      const reserved = (env: (typeof TESTED_ENVIRONMENTS)[number]) =>
        Object.fromEntries(
          FUNCTION_IDS.map((id) => [
            id,
            functionResource(synthesized.stacks[env], synthesized.templates[env], id).Properties
              .ReservedConcurrentExecutions,
          ]).filter(([, value]) => value !== undefined),
        );
      expect(reserved('prod')).toEqual({ Authorizer: 50, PaymentsCreate: 400 });
      // Dev accounts may start with a concurrency limit of 10, and a reservation there fails the deploy.
      expect(reserved('dev')).toEqual({});
    });

    it('traces with X-Ray in prod only', () => {
      const { dev, prod } = synthesized.templates;
      prod.allResourcesProperties('AWS::Lambda::Function', { TracingConfig: { Mode: 'Active' } });
      dev.allResourcesProperties('AWS::Lambda::Function', { TracingConfig: Match.absent() });
    });

    it('configures every function: tables, lease and TTL, service name, log level, and its own extras', () => {
      // Each outside system's URL and timeout, and how long a booking may still land after its client gave up.
      const ORDER_CALLS_ENV = [
        'MAILER_TIMEOUT_MS',
        'MAILER_URL',
        'PROCESSOR_TIMEOUT_MS',
        'PROCESSOR_URL',
        'WAREHOUSE_PROCESSING_WINDOW_MS',
        'WAREHOUSE_TIMEOUT_MS',
        'WAREHOUSE_URL',
      ];
      const extras: Record<string, string[]> = {
        PaymentsCreate: ['PROCESSOR_TIMEOUT_MS', 'PROCESSOR_URL'],
        PaymentsGet: [],
        OrdersCreate: ORDER_CALLS_ENV,
        OrdersGet: [],
        InventoryGet: [],
        Authorizer: [],
        WebhookReceiver: ['PROCESSOR_WEBHOOK_SECRET_ARN', 'SETTLEMENT_QUEUE_URL'],
        SettlementConsumer: ['MAILER_TIMEOUT_MS', 'MAILER_URL', 'SETTLEMENT_DLQ_URL', 'SETTLEMENT_QUEUE_URL'],
        PaymentsCompleter: ORDER_CALLS_ENV,
      };
      each((stack, template) => {
        for (const id of FUNCTION_IDS) {
          const environment = environmentOf(functionResource(stack, template, id));
          const tables = Object.keys(DYNAMODB_ACCESS[id]!)
            .filter((table) => table !== 'RecoveryIndex')
            .map((table) => tableDefinitions.find((definition) => definition.id === table)!.envVar);
          const common = [
            'IDEMPOTENCY_LEASE_SECONDS',
            'IDEMPOTENCY_TTL_SECONDS',
            'LOG_LEVEL',
            'NODE_OPTIONS',
            'POWERTOOLS_METRICS_NAMESPACE',
            'POWERTOOLS_SERVICE_NAME',
            'POWERTOOLS_TRACE_ENABLED',
          ];
          expect(Object.keys(environment).sort()).toEqual([...common, ...tables, ...extras[id]!].sort());
          expect(environment.POWERTOOLS_METRICS_NAMESPACE).toBe(`Keystone/${stack.stackName.replace('Keystone-', '')}`);
          for (const definition of tableDefinitions) {
            if (environment[definition.envVar] === undefined) continue;
            expect(environment[definition.envVar]).toEqual(stack.resolve(stack.tables.get(definition).tableName));
          }
        }
      });
    });
  });

  describe('permissions', () => {
    it('grants each function exactly its DynamoDB actions, on its tables only', () => {
      each((stack, template) => {
        for (const id of FUNCTION_IDS) {
          const granted = actionsByResource(statementsOf(stack, template, id));
          const dynamodb = Object.fromEntries(
            Object.entries(granted)
              .map(([resource, actions]): [string, string[]] => [
                resource,
                actions.filter((action) => action.startsWith('dynamodb:')),
              ])
              .filter(([, actions]) => actions.length > 0),
          );
          const expected = Object.fromEntries(
            Object.entries(DYNAMODB_ACCESS[id]!).map(([table, actions]) => {
              const definition = table === 'Payments' ? paymentsTable : idempotencyTable;
              const arn = stack.tables.get(definition).tableArn;
              const resource = table === 'RecoveryIndex' ? `${arn}/index/${RECOVERY_INDEX}` : arn;
              return [JSON.stringify(stack.resolve(resource)), actions];
            }),
          );
          expect({ id, dynamodb }).toEqual({ id, dynamodb: expected });
        }
      });
    });

    it('grants nothing else but logs to its own group, the queue and the secret where the table says so', () => {
      each((stack, template) => {
        const queue = JSON.stringify(stack.resolve(stack.settlement.queue.queueArn));
        const deadLetters = JSON.stringify(stack.resolve(stack.settlement.deadLetterQueue.queueArn));
        const secret = JSON.stringify(stack.resolve(stack.webhookSecret.secretArn));
        const others: Record<string, Record<string, string[]>> = {
          WebhookReceiver: { [queue]: ['sqs:SendMessage'], [secret]: ['secretsmanager:GetSecretValue'] },
          // The event source mapping's own grant: it polls the queue as the function's role.
          SettlementConsumer: {
            [queue]: [
              'sqs:ChangeMessageVisibility',
              'sqs:DeleteMessage',
              'sqs:GetQueueAttributes',
              'sqs:GetQueueUrl',
              'sqs:ReceiveMessage',
            ],
            // A record that can never succeed is moved to the DLQ at once, not after maxReceiveCount receives.
            [deadLetters]: ['sqs:SendMessage'],
          },
        };
        for (const id of FUNCTION_IDS) {
          const logGroup = JSON.stringify(stack.resolve(stack.functions.get(id)!.logGroup.logGroupArn));
          const granted = Object.fromEntries(
            Object.entries(actionsByResource(statementsOf(stack, template, id))).filter(
              ([, actions]) => !actions.some((action) => action.startsWith('dynamodb:')),
            ),
          );
          expect({ id, granted }).toEqual({
            id,
            granted: { [logGroup]: ['logs:CreateLogStream', 'logs:PutLogEvents'], ...others[id] },
          });
        }
      });
    });

    it('grants no wildcard action, and "*" as a resource to X-Ray only', () => {
      each((_, template) => {
        for (const policy of Object.values(template.findResources('AWS::IAM::Policy'))) {
          for (const statement of policy.Properties.PolicyDocument.Statement as Statement[]) {
            const actions = ([] as string[]).concat(statement.Action);
            for (const action of actions) expect(action).not.toMatch(/\*|:Scan$/);
            // Query only ever on an index (the completer's sparse recovery index), never on a table.
            if (actions.includes('dynamodb:Query')) expect(JSON.stringify(statement.Resource)).toMatch(/\/index\//);
            if (statement.Resource === '*') expect(actions.every((action) => action.startsWith('xray:'))).toBe(true);
          }
        }
      });
    });

    it('attaches no AWS managed policy to a function role', () => {
      each((stack, template) => {
        for (const id of FUNCTION_IDS) {
          const role = resourceOf(template, stack, l1(stack.functions.get(id)!.role));
          expect(role.Properties.ManagedPolicyArns).toBeUndefined();
        }
      });
    });
  });

  describe('settlement queue', () => {
    it('consumes batches of 10 and reports failed items instead of failing the batch', () => {
      each((stack, template) => {
        template.resourceCountIs('AWS::Lambda::EventSourceMapping', 1);
        template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
          EventSourceArn: stack.resolve(stack.settlement.queue.queueArn),
          FunctionName: { Ref: stack.getLogicalId(l1(stack.functions.get('SettlementConsumer')!.function)) },
          BatchSize: 10,
          FunctionResponseTypes: ['ReportBatchItemFailures'],
        });
      });
    });

    it("caps the consumers a backlog can take at the environment's maximum concurrency", () => {
      const maxConcurrency = { dev: 2, prod: 10 };
      for (const env of TESTED_ENVIRONMENTS) {
        synthesized.templates[env].hasResourceProperties('AWS::Lambda::EventSourceMapping', {
          ScalingConfig: { MaximumConcurrency: maxConcurrency[env] },
        });
      }
    });

    it('moves a settlement to the dead-letter queue after 5 receives, and keeps it there 14 days', () => {
      each((stack, template) => {
        const queue = resourceOf(template, stack, l1(stack.settlement.queue));
        expect(queue.Properties.RedrivePolicy).toEqual({
          deadLetterTargetArn: stack.resolve(stack.settlement.deadLetterQueue.queueArn),
          maxReceiveCount: 5,
        });
        const deadLetters = resourceOf(template, stack, l1(stack.settlement.deadLetterQueue));
        expect(deadLetters.Properties.MessageRetentionPeriod).toBe(14 * 24 * 60 * 60);
      });
    });

    it("hides a received message for at least 6 times the consumer's timeout", () => {
      each((stack, template) => {
        const consumer = functionResource(stack, template, 'SettlementConsumer');
        const queue = resourceOf(template, stack, l1(stack.settlement.queue));
        expect(queue.Properties.VisibilityTimeout).toBeGreaterThanOrEqual(6 * (consumer.Properties.Timeout as number));
      });
    });

    it('encrypts both queues and refuses requests without TLS', () => {
      each((_, template) => {
        template.allResourcesProperties('AWS::SQS::Queue', { SqsManagedSseEnabled: true });
        template.resourcePropertiesCountIs(
          'AWS::SQS::QueuePolicy',
          {
            PolicyDocument: {
              Statement: Match.arrayWith([
                Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
              ]),
            },
          },
          2,
        );
      });
    });
  });

  describe('the completer', () => {
    it('runs on an EventBridge schedule every recovery period, without retrying a failed run', () => {
      each((stack, template) => {
        const completer = stack.getLogicalId(l1(stack.functions.get('PaymentsCompleter')!.function));
        const rules = Object.values(template.findResources('AWS::Events::Rule')) as CfnResourceJson[];
        expect(rules).toHaveLength(1);
        expect(rules[0]!.Properties).toMatchObject({
          ScheduleExpression: 'rate(1 minute)',
          State: 'ENABLED',
          Targets: [{ Arn: { 'Fn::GetAtt': [completer, 'Arn'] }, RetryPolicy: { MaximumRetryAttempts: 0 } }],
        });
        template.hasResourceProperties('AWS::Lambda::Permission', {
          Action: 'lambda:InvokeFunction',
          Principal: 'events.amazonaws.com',
          FunctionName: { 'Fn::GetAtt': [completer, 'Arn'] },
        });
      });
    });

    it('comes around more often than the lease, so recovery takes under twice the lease', () => {
      each((stack, template) => {
        const completer = functionResource(stack, template, 'PaymentsCompleter');
        const [rule] = Object.values(template.findResources('AWS::Events::Rule')) as CfnResourceJson[];
        const [, amount, unit] = /^rate\((\d+) (minute|minutes)\)$/.exec(String(rule!.Properties.ScheduleExpression))!;
        expect(unit).toMatch(/minute/);
        const periodSeconds = Number(amount) * 60;
        expect(Number(environmentOf(completer).IDEMPOTENCY_LEASE_SECONDS)).toBeGreaterThan(periodSeconds);
      });
    });
  });

  describe('timeouts', () => {
    it('leases a key longer than any function can run', () => {
      each((stack, template) => {
        for (const id of FUNCTION_IDS) {
          const fn = functionResource(stack, template, id);
          expect(Number(environmentOf(fn).IDEMPOTENCY_LEASE_SECONDS)).toBeGreaterThan(fn.Properties.Timeout as number);
        }
      });
    });

    it('gives each function the time its outside calls take one after another, as its spec declares them', () => {
      const timeoutVariable = {
        processor: 'PROCESSOR_TIMEOUT_MS',
        warehouse: 'WAREHOUSE_TIMEOUT_MS',
        mailer: 'MAILER_TIMEOUT_MS',
      };
      each((stack, template) => {
        for (const spec of serviceFunctions) {
          const fn = functionResource(stack, template, spec.id);
          const environment = environmentOf(fn);
          const chainMs = (spec.calls ?? []).reduce((sum, call) => sum + Number(environment[timeoutVariable[call]]), 0);
          expect({
            id: spec.id,
            fits: chainMs + STORE_WRITES_MARGIN_MS <= (fn.Properties.Timeout as number) * 1000,
          }).toEqual({ id: spec.id, fits: true });
        }
      });
    });

    it('lets API Gateway give up before the function behind it does', () => {
      each((stack, template) => {
        const methods = Object.values(template.findResources('AWS::ApiGateway::Method'));
        // POST and GET of payments and of orders, GET of inventory, and the webhook.
        expect(methods).toHaveLength(6);
        for (const method of methods) {
          const integration = method.Properties.Integration;
          const id = FUNCTION_IDS.find((candidate) =>
            JSON.stringify(integration.Uri).includes(
              `"${stack.getLogicalId(l1(stack.functions.get(candidate)!.function))}"`,
            ),
          );
          const fn = functionResource(stack, template, id!);
          expect(integration.TimeoutInMillis).toBeLessThan((fn.Properties.Timeout as number) * 1000);
        }
      });
    });
  });

  describe('API', () => {
    function method(stack: PaymentsStack, template: Template, httpMethod: string, resourcePath: string) {
      const found = restApiOf(stack).methods.find(
        (m) => m.httpMethod === httpMethod && m.resource.path === resourcePath,
      );
      if (!found) throw new Error(`no ${httpMethod} ${resourcePath}`);
      return resourceOf(template, stack, l1(found)).Properties;
    }

    it('puts the TOKEN authorizer on the payments routes, and none on the webhook', () => {
      each((stack, template) => {
        const authorizerId = Object.keys(template.findResources('AWS::ApiGateway::Authorizer'))[0];
        for (const [verb, route] of [
          ['POST', '/payments'],
          ['GET', '/payments/{id}'],
        ] as const) {
          expect(method(stack, template, verb, route)).toMatchObject({
            AuthorizationType: 'CUSTOM',
            AuthorizerId: { Ref: authorizerId },
          });
        }
        const webhook = method(stack, template, 'POST', '/webhooks/processor');
        expect(webhook.AuthorizationType).toBe('NONE');
        expect(webhook.AuthorizerId).toBeUndefined();
      });
    });

    it('authorizes the Authorization header through the authorizer function, cached as long as the environment says', () => {
      const cacheSeconds = { dev: 0, prod: 60 };
      for (const env of TESTED_ENVIRONMENTS) {
        const stack = synthesized.stacks[env];
        const template = synthesized.templates[env];
        template.resourceCountIs('AWS::ApiGateway::Authorizer', 1);
        const authorizerFunction = stack.getLogicalId(l1(stack.functions.get('Authorizer')!.function));
        template.hasResourceProperties('AWS::ApiGateway::Authorizer', {
          Type: 'TOKEN',
          IdentitySource: 'method.request.header.Authorization',
          AuthorizerResultTtlInSeconds: cacheSeconds[env],
        });
        const [authorizer] = Object.values(template.findResources('AWS::ApiGateway::Authorizer'));
        expect(JSON.stringify(authorizer?.Properties.AuthorizerUri)).toContain(`"${authorizerFunction}"`);
      }
    });

    it('answers a malformed Authorization header with 401 before the authorizer function runs', () => {
      each((_, template) => {
        template.hasResourceProperties('AWS::ApiGateway::Authorizer', {
          IdentityValidationExpression: AUTHORIZATION_HEADER_PATTERN,
        });
      });
      const pattern = new RegExp(AUTHORIZATION_HEADER_PATTERN);
      const accepted = ['Bearer sk_test_AbC-123_xyz', 'bearer sk_live_x', 'BEARER\tkey', 'Bearer  key'];
      const rejected = ['', 'Bearer', 'Bearer ', 'Basic dXNlcjpwYXNz', 'sk_test_abc', 'Bearer two words', 'Bearer kéy'];
      expect(accepted.filter((header) => !pattern.test(header))).toEqual([]);
      expect(rejected.filter((header) => pattern.test(header))).toEqual([]);
    });

    it('provisions no usage plans or API Gateway keys: per-client limits are the WAF per-key rule', () => {
      each((_, template) => {
        template.resourceCountIs('AWS::ApiGateway::UsagePlan', 0);
        template.resourceCountIs('AWS::ApiGateway::ApiKey', 0);
        template.allResourcesProperties('AWS::ApiGateway::Method', { ApiKeyRequired: Match.absent() });
      });
    });

    it('checks only that the create body is a JSON object at the gateway, and says so as the function would', () => {
      each((stack, template) => {
        const create = method(stack, template, 'POST', '/payments');
        const { Ref: modelId } = (create.RequestModels as Record<string, { Ref: string }>)['application/json']!;
        const model = template.toJSON().Resources[modelId].Properties;
        expect(model).toMatchObject({ Name: 'JsonObject', ContentType: 'application/json' });
        expect(model.Schema).toEqual({ $schema: 'http://json-schema.org/draft-04/schema#', type: 'object' });
        const [badBody] = Object.values(
          template.findResources('AWS::ApiGateway::GatewayResponse', {
            Properties: { ResponseType: 'BAD_REQUEST_BODY' },
          }),
        );
        const body = JSON.parse(badBody?.Properties.ResponseTemplates['application/json']);
        expect(body).toMatchObject({
          type: 'https://keystone-idempotency.dev/problems/invalid-body',
          status: 400,
          errors: [{ path: '', message: 'expected a JSON object' }],
        });
        expect(badBody?.Properties.ResponseParameters).toEqual({
          'gatewayresponse.header.Content-Type': "'application/problem+json'",
        });
        template.hasResourceProperties('AWS::ApiGateway::RequestValidator', {
          ValidateRequestBody: true,
          ValidateRequestParameters: true,
        });
        expect(method(stack, template, 'GET', '/payments/{id}').RequestParameters).toEqual({
          'method.request.path.id': true,
        });
      });
    });

    it('throttles the stage per environment and logs access as JSON, execution errors only, no bodies', () => {
      const limits = { dev: [10, 20], prod: [200, 400] };
      for (const env of TESTED_ENVIRONMENTS) {
        const template = synthesized.templates[env];
        const [rate, burst] = limits[env];
        const stage = Object.values(template.findResources('AWS::ApiGateway::Stage'))[0]!.Properties;
        expect(stage.MethodSettings).toEqual([
          {
            HttpMethod: '*',
            ResourcePath: '/*',
            ThrottlingRateLimit: rate,
            ThrottlingBurstLimit: burst,
            LoggingLevel: 'ERROR',
            DataTraceEnabled: false,
          },
        ]);
        const format = JSON.parse(stage.AccessLogSetting.Format);
        expect(format).toMatchObject({ requestId: '$context.requestId', status: '$context.status' });
        expect(stage.AccessLogSetting.DestinationArn).toBeDefined();
        expect(stage.TracingEnabled ?? false).toBe(env === 'prod');
      }
    });

    it('answers its own errors as RFC 9457 problems', () => {
      each((_, template) => {
        for (const type of ['DEFAULT_4XX', 'DEFAULT_5XX']) {
          template.hasResourceProperties('AWS::ApiGateway::GatewayResponse', {
            ResponseType: type,
            ResponseParameters: { 'gatewayresponse.header.Content-Type': "'application/problem+json'" },
          });
        }
      });
    });

    it('answers a route whose function Lambda throttled with a 429 that says when to come back', () => {
      each((_, template) => {
        const found = Object.values(
          template.findResources('AWS::ApiGateway::GatewayResponse', {
            Properties: { ResponseType: 'INTEGRATION_FAILURE' },
          }),
        );
        expect(found).toHaveLength(1);
        const { StatusCode, ResponseParameters, ResponseTemplates } = found[0]!.Properties;
        // API Gateway's default for a throttled proxy integration is a 500 "Internal server error".
        expect(StatusCode).toBe('429');
        expect(ResponseParameters).toEqual({
          'gatewayresponse.header.Content-Type': "'application/problem+json'",
          'gatewayresponse.header.Retry-After': "'1'",
        });
        expect(JSON.parse(ResponseTemplates['application/json'])).toEqual({
          type: 'about:blank',
          title: 'Too Many Requests',
          status: 429,
          detail: expect.stringContaining('Retry after'),
          requestId: '$context.requestId',
        });
        // The local stack answers from the same definition.
        expect(ResponseTemplates['application/json']).toBe(THROTTLED_INTEGRATION.template);
      });
    });

    it('sits behind a WAF web ACL', () => {
      each((stack, template) => {
        template.resourceCountIs('AWS::WAFv2::WebACLAssociation', 1);
        const association = Object.values(template.findResources('AWS::WAFv2::WebACLAssociation'))[0]!;
        expect(JSON.stringify(association.Properties.ResourceArn)).toContain(
          `"${stack.getLogicalId(l1(restApiOf(stack).deploymentStage))}"`,
        );
      });
    });

    describe('WAF rate limits', () => {
      function rule(env: (typeof TESTED_ENVIRONMENTS)[number], name: string) {
        const [acl] = Object.values(synthesized.templates[env].findResources('AWS::WAFv2::WebACL'));
        const found = (acl!.Properties.Rules as { Name: string }[]).find((candidate) => candidate.Name === name);
        if (!found) throw new Error(`no WAF rule ${name} in ${env}`);
        return found as { Name: string; Action: unknown; Statement: { RateBasedStatement: Record<string, unknown> } };
      }

      it('limit each API key, not each IP, to its share of the stage: counted in prod until switched to block', () => {
        expect(rule('prod', 'RatePerApiKey')).toMatchObject({
          Action: { Count: {} },
          Statement: {
            RateBasedStatement: {
              Limit: 30_000,
              AggregateKeyType: 'CUSTOM_KEYS',
              CustomKeys: [{ Header: { Name: 'authorization', TextTransformations: [{ Priority: 0, Type: 'NONE' }] } }],
            },
          },
        });
        expect(rule('dev', 'RatePerApiKey')).toMatchObject({
          Action: { Block: {} },
          Statement: { RateBasedStatement: { Limit: 1_500 } },
        });
      });

      it("let one IP send at the stage's full rate before WAF blocks it", () => {
        for (const env of TESTED_ENVIRONMENTS) {
          const { RateBasedStatement } = rule(env, 'RatePerIp').Statement;
          expect(RateBasedStatement.AggregateKeyType).toBe('IP');
          expect(RateBasedStatement.Limit).toBe(environments[env].throttling.rateLimit * 300);
        }
        expect(rule('prod', 'RatePerIp').Action).toEqual({ Block: {} });
      });

      it('exempt exactly POST /webhooks/processor from the per-IP limit, and nothing that merely contains it', () => {
        const exact = (field: string, value: string) => ({
          ByteMatchStatement: {
            FieldToMatch: { [field]: {} },
            PositionalConstraint: 'EXACTLY',
            SearchString: value,
            TextTransformations: [{ Priority: 0, Type: 'NONE' }],
          },
        });
        for (const env of TESTED_ENVIRONMENTS) {
          expect(rule(env, 'RatePerIp').Statement.RateBasedStatement.ScopeDownStatement).toEqual({
            NotStatement: {
              Statement: {
                AndStatement: {
                  Statements: [
                    exact('Method', 'POST'),
                    {
                      OrStatement: {
                        Statements: [
                          exact('UriPath', '/v1/webhooks/processor'),
                          exact('UriPath', '/webhooks/processor'),
                        ],
                      },
                    },
                  ],
                },
              },
            },
          });
          expect(JSON.stringify(synthesized.templates[env].findResources('AWS::WAFv2::WebACL'))).not.toContain(
            'CONTAINS',
          );
        }
      });
    });
  });

  describe('alarms', () => {
    function alarmsOn(template: Template, metricName: string): CfnResourceJson[] {
      const alarms = template.findResources('AWS::CloudWatch::Alarm', { Properties: { MetricName: metricName } });
      return Object.values(alarms) as CfnResourceJson[];
    }

    it('alarms once on each recovery outcome, however many functions count it', () => {
      each((_, template) => {
        for (const metric of ['PaymentsCompletedWithoutClient', 'PaymentsAbandoned']) {
          const alarms = alarmsOn(template, metric);
          expect(alarms).toHaveLength(1);
          expect(alarms[0]!.Properties).toMatchObject({
            Dimensions: [{ Name: 'service', Value: 'payment-recovery' }],
            Statistic: 'Sum',
          });
          expect(String(alarms[0]!.Properties.AlarmName)).toContain('SettlementConsumerAndPaymentsCompleter');
        }
      });
    });

    it('alarms on one order abandoned with its progress kept, which needs a person', () => {
      each((_, template) => {
        const alarms = alarmsOn(template, 'OperationsAbandonedWithProgress');
        expect(alarms).toHaveLength(1);
        expect(alarms[0]!.Properties).toMatchObject({
          Dimensions: [{ Name: 'service', Value: 'payment-recovery' }],
          Statistic: 'Sum',
          Threshold: 1,
        });
        expect(String(alarms[0]!.Properties.AlarmName)).toMatch(/PaymentsCompleter OperationsAbandonedWithProgress$/);
      });
    });

    it('alarms on one order whose compensation keeps failing, which needs a person', () => {
      each((_, template) => {
        const alarms = alarmsOn(template, 'OperationsCompensationStuck');
        expect(alarms).toHaveLength(1);
        expect(alarms[0]!.Properties).toMatchObject({
          Dimensions: [{ Name: 'service', Value: 'payment-recovery' }],
          Statistic: 'Sum',
          Threshold: 1,
        });
      });
    });

    it("alarms on each function's errors and throttles, on any dead letter", () => {
      each((_, template) => {
        expect(alarmsOn(template, 'Errors')).toHaveLength(FUNCTION_IDS.length);
        expect(alarmsOn(template, 'Throttles')).toHaveLength(FUNCTION_IDS.length);
        const [deadLetters] = alarmsOn(template, 'ApproximateNumberOfMessagesVisible');
        expect(deadLetters?.Properties).toMatchObject({
          Namespace: 'AWS/SQS',
          Threshold: 0,
          ComparisonOperator: 'GreaterThanThreshold',
        });
      });
    });

    it('alarms on a settlement still waiting after a few retries, well before it could reach the DLQ', () => {
      const threshold = { dev: 600, prod: 360 };
      for (const env of TESTED_ENVIRONMENTS) {
        const { stacks, templates } = synthesized;
        const alarms = alarmsOn(templates[env], 'ApproximateAgeOfOldestMessage');
        expect(alarms).toHaveLength(1);
        expect(alarms[0]!.Properties).toMatchObject({
          Namespace: 'AWS/SQS',
          Statistic: 'Maximum',
          Period: 60,
          Threshold: threshold[env],
          Dimensions: [{ Name: 'QueueName', Value: stacks[env].resolve(stacks[env].settlement.queue.queueName) }],
        });
        // The DLQ takes 5 receives of 180 s each: 900 s.
        expect(threshold[env]).toBeLessThan(900);
      }
    });

    it("alarms on leases lost and takeovers for each function that counts them, in its environment's namespace", () => {
      const takeovers = { dev: 5, prod: 3 };
      for (const env of TESTED_ENVIRONMENTS) {
        for (const [metric, threshold] of [
          ['IdempotencyLeaseLost', 1],
          ['IdempotencyTakeover', takeovers[env]],
        ] as const) {
          const alarms = alarmsOn(synthesized.templates[env], metric).map((alarm) => alarm.Properties);
          expect(alarms.map((alarm) => alarm.Dimensions)).toEqual([
            [{ Name: 'service', Value: 'payments' }],
            [{ Name: 'service', Value: 'orders' }],
            [{ Name: 'service', Value: 'webhooks' }],
          ]);
          for (const alarm of alarms) {
            expect(alarm).toMatchObject({ Namespace: `Keystone/${env}`, Statistic: 'Sum', Threshold: threshold });
            expect(alarm.AlarmDescription).toEqual(expect.stringMatching(/.{60,}/));
          }
        }
      }
    });

    it('alarms on exactly the namespace, name and dimension the function publishes', () => {
      const { stacks, templates } = synthesized;
      const fn = functionResource(stacks.prod, templates.prod, 'PaymentsCreate');
      const saved = process.env.POWERTOOLS_METRICS_NAMESPACE;
      process.env.POWERTOOLS_METRICS_NAMESPACE = environmentOf(fn).POWERTOOLS_METRICS_NAMESPACE as string;
      try {
        // What Powertools writes to the log (EMF) when payments-create counts a lost lease.
        const metrics = serviceMetrics(MetricService.payments);
        metrics.addMetric(IdempotencyMetric.leaseLost, 'Count', 1);
        const emf = metrics.serializeMetrics() as unknown as {
          _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string }[] }[] };
          [dimension: string]: unknown;
        };
        const [published] = emf._aws.CloudWatchMetrics;
        const dimensions = published!.Dimensions[0]!.map((name) => ({ Name: name, Value: emf[name] }));
        const alarm = alarmsOn(templates.prod, published!.Metrics[0]!.Name).find(
          (candidate) => JSON.stringify(candidate.Properties.Dimensions) === JSON.stringify(dimensions),
        );
        expect(alarm?.Properties.Namespace).toBe(published!.Namespace);
      } finally {
        if (saved === undefined) delete process.env.POWERTOOLS_METRICS_NAMESPACE;
        else process.env.POWERTOOLS_METRICS_NAMESPACE = saved;
      }
    });

    it('alarms when payment recovery falls behind, or stops publishing, on what the completer publishes', () => {
      const { stacks, templates } = synthesized;
      for (const env of TESTED_ENVIRONMENTS) {
        const alarms = alarmsOn(templates[env], RecoveryBacklogMetric.oldestDueAge);
        expect(alarms).toHaveLength(1);
        expect(alarms[0]!.Properties).toMatchObject({
          Namespace: `Keystone/${env}`,
          Dimensions: [{ Name: 'service', Value: 'payment-recovery' }],
          Statistic: 'Maximum',
          Threshold: 300,
          ComparisonOperator: 'GreaterThanThreshold',
          TreatMissingData: 'breaching',
        });
      }
      // What Powertools writes (EMF) when the completer publishes the age, in prod's namespace.
      const fn = functionResource(stacks.prod, templates.prod, 'PaymentsCompleter');
      const saved = process.env.POWERTOOLS_METRICS_NAMESPACE;
      process.env.POWERTOOLS_METRICS_NAMESPACE = environmentOf(fn).POWERTOOLS_METRICS_NAMESPACE as string;
      try {
        const metrics = serviceMetrics(MetricService.recovery);
        metrics.addMetric(RecoveryBacklogMetric.oldestDueAge, 'Seconds', 42);
        const emf = metrics.serializeMetrics() as unknown as {
          _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string }[] }[] };
          [dimension: string]: unknown;
        };
        const [published] = emf._aws.CloudWatchMetrics;
        const [alarm] = alarmsOn(templates.prod, published!.Metrics[0]!.Name);
        expect(alarm?.Properties).toMatchObject({
          Namespace: published!.Namespace,
          Dimensions: published!.Dimensions[0]!.map((name) => ({ Name: name, Value: emf[name] })),
        });
      } finally {
        if (saved === undefined) delete process.env.POWERTOOLS_METRICS_NAMESPACE;
        else process.env.POWERTOOLS_METRICS_NAMESPACE = saved;
      }
    });

    it('alarms on the share of API requests answered 5xx, not on single errors', () => {
      each((_, template) => {
        expect(alarmsOn(template, '5XXError')).toHaveLength(0);
        const rate = Object.values(template.findResources('AWS::CloudWatch::Alarm')).filter(
          (alarm) => alarm.Properties.Metrics !== undefined,
        );
        expect(rate).toHaveLength(1);
        const metrics = rate[0]!.Properties.Metrics as { Id: string; Expression?: string; MetricStat?: unknown }[];
        expect(metrics.find((metric) => metric.Expression)?.Expression).toMatch(
          /^IF\(requests >= \d+, 100 \* errors \/ requests, 0\)$/,
        );
        expect(JSON.stringify(metrics)).toContain('"MetricName":"5XXError"');
        expect(JSON.stringify(metrics)).toContain('"MetricName":"Count"');
      });
      expect(
        Object.values(synthesized.templates.prod.findResources('AWS::CloudWatch::Alarm')).find(
          (alarm) => alarm.Properties.Metrics,
        )?.Properties.Threshold,
      ).toBe(1);
    });

    it("sends every alarm of every environment, and its recovery, to that environment's topic", () => {
      each((_, template) => {
        template.resourceCountIs('AWS::SNS::Topic', 1);
        const topic = Object.keys(template.findResources('AWS::SNS::Topic'))[0];
        template.allResourcesProperties('AWS::CloudWatch::Alarm', {
          AlarmActions: [{ Ref: topic }],
          OKActions: [{ Ref: topic }],
        });
        template.hasOutput('AlarmTopicArn', { Value: { Ref: topic } });
      });
    });

    it("subscribes the environment's addresses and endpoints to its topic, and no placeholder", () => {
      each((_, template) => template.resourceCountIs('AWS::SNS::Subscription', 0));
      const app = new App({ context: { ...CDK_JSON_CONTEXT, 'aws:cdk:bundling-stacks': [] } });
      const config = {
        ...environments.prod,
        alarms: {
          ...environments.prod.alarms,
          subscriptions: [
            { protocol: 'email', address: 'oncall@payments.test' },
            { protocol: 'https', url: 'https://pager.test/integration/keystone' },
          ] as const,
        },
      };
      const template = Template.fromStack(new PaymentsStack(app, 'Subscribed', { config }));
      const topic = Object.keys(template.findResources('AWS::SNS::Topic'))[0];
      template.resourceCountIs('AWS::SNS::Subscription', 2);
      template.hasResourceProperties('AWS::SNS::Subscription', {
        Protocol: 'email',
        Endpoint: 'oncall@payments.test',
        TopicArn: { Ref: topic },
      });
      template.hasResourceProperties('AWS::SNS::Subscription', {
        Protocol: 'https',
        Endpoint: 'https://pager.test/integration/keystone',
      });
    });
  });

  describe('dashboard', () => {
    function body(env: (typeof TESTED_ENVIRONMENTS)[number]): string {
      const dashboards = Object.values(synthesized.templates[env].findResources('AWS::CloudWatch::Dashboard'));
      expect(dashboards).toHaveLength(1);
      expect(dashboards[0]!.Properties.DashboardName).toBe(`Keystone-${env}-operations`);
      // The body is a Fn::Join of JSON text and references; the text is what the checks below read.
      return JSON.stringify(dashboards[0]!.Properties.DashboardBody);
    }

    it("charts requests, each idempotency outcome per function, in the environment's namespace", () => {
      for (const env of TESTED_ENVIRONMENTS) {
        const text = body(env);
        expect(text).toContain('\\"Count\\"');
        for (const name of ['Replayed', 'InFlight', 'Mismatch', 'Takeover', 'LeaseLost']) {
          for (const service of ['payments', 'webhooks']) {
            expect(text).toContain(`[\\"Keystone/${env}\\",\\"Idempotency${name}\\",\\"service\\",\\"${service}\\"`);
          }
        }
      }
    });

    it("charts latency p50 and p99 per function, the queue's depth and age, and the DLQ's depth", () => {
      const text = body('prod');
      for (const id of FUNCTION_IDS) {
        expect(text).toContain(`\\"label\\":\\"${id}\\",\\"period\\":60,\\"stat\\":\\"p50\\"`);
        expect(text).toContain(`\\"label\\":\\"${id}\\",\\"period\\":60,\\"stat\\":\\"p99\\"`);
      }
      for (const metric of ['ApproximateNumberOfMessagesVisible', 'ApproximateAgeOfOldestMessage', 'dead letters']) {
        expect(text).toContain(metric);
      }
    });
  });

  describe('environments', () => {
    it('names each stack after its environment and tags its resources with it', () => {
      for (const env of TESTED_ENVIRONMENTS) {
        const stack = synthesized.stacks[env];
        expect(stack.stackName).toBe(`Keystone-${env}`);
        synthesized.templates[env].allResourcesProperties('AWS::DynamoDB::Table', {
          Tags: Match.arrayWith([{ Key: 'Environment', Value: env }]),
        });
      }
      expect(synthesized.stacks.prod.terminationProtection).toBe(true);
      expect(synthesized.stacks.dev.terminationProtection).toBe(false);
    });
  });
});
