import { bundledEnvironment } from '../../lib/local/bundled-environment';
import type { DeployedFunction, TemplateValue } from '../../lib/local/cloud-assembly';

/** Functions shaped as the synthesized dev template has them (Keystone-dev.template.json). */
const RESOURCE_TYPES: Record<string, string> = {
  TablesIdempotency498FF680: 'AWS::DynamoDB::Table',
  TablesPayments3BE89793: 'AWS::DynamoDB::Table',
  SettlementQueue4278E8AC: 'AWS::SQS::Queue',
  SettlementDeadLetters0E58B12A: 'AWS::SQS::Queue',
  ProcessorWebhookSecret10E4D665: 'AWS::SecretsManager::Secret',
  AlarmTopic: 'AWS::SNS::Topic',
  DatabaseProxyE01FC4E6: 'AWS::RDS::DBProxy',
};
const resourceType = (logicalId: string) => RESOURCE_TYPES[logicalId];

const FIXED = {
  NODE_OPTIONS: '--enable-source-maps',
  POWERTOOLS_TRACE_ENABLED: 'false',
  POWERTOOLS_SERVICE_NAME: 'payments',
  POWERTOOLS_METRICS_NAMESPACE: 'Keystone/dev',
  LOG_LEVEL: 'DEBUG',
  IDEMPOTENCY_LEASE_SECONDS: '90',
  IDEMPOTENCY_TTL_SECONDS: '86400',
};

function deployed(id: string, environment: Record<string, TemplateValue>): DeployedFunction {
  return {
    id,
    logicalId: `${id}Function`,
    codeDirectory: `/cdk.out/asset.${id}`,
    handler: 'index.handler',
    runtime: 'nodejs22.x',
    timeoutSeconds: 12,
    memoryMb: 512,
    environment,
  };
}

const paymentsCreate = deployed('PaymentsCreate', {
  ...FIXED,
  IDEMPOTENCY_TABLE: { Ref: 'TablesIdempotency498FF680' },
  PAYMENTS_TABLE: { Ref: 'TablesPayments3BE89793' },
  PROCESSOR_URL: 'https://processor.dev.example.com',
  PROCESSOR_TIMEOUT_MS: '8000',
});
const paymentsGet = deployed('PaymentsGet', { ...FIXED, PAYMENTS_TABLE: { Ref: 'TablesPayments3BE89793' } });
const webhookReceiver = deployed('WebhookReceiver', {
  ...FIXED,
  IDEMPOTENCY_TABLE: { Ref: 'TablesIdempotency498FF680' },
  SETTLEMENT_QUEUE_URL: { Ref: 'SettlementQueue4278E8AC' },
  PROCESSOR_WEBHOOK_SECRET_ARN: { Ref: 'ProcessorWebhookSecret10E4D665' },
});

/** Everything the local stack knows: more than any one function may see. */
const LOCAL = {
  IDEMPOTENCY_TABLE: 'local-idempotency',
  PAYMENTS_TABLE: 'local-payments',
  SETTLEMENT_QUEUE_URL: 'http://sqs.local.localhost:4566/000000000000/settlement',
  SETTLEMENT_DLQ_URL: 'http://sqs.local.localhost:4566/000000000000/settlement-dlq',
  PROCESSOR_URL: 'http://127.0.0.1:4010',
  MAILER_URL: 'http://127.0.0.1:4010',
  PROCESSOR_WEBHOOK_SECRET: 'whsec_local',
  DYNAMODB_ENDPOINT: 'http://127.0.0.1:8000',
  SQS_ENDPOINT: 'http://127.0.0.1:4566',
};

describe('bundledEnvironment', () => {
  it('keeps every literal the template sets and replaces only what exists once deployed', () => {
    const { variables, substituted, overridden } = bundledEnvironment(paymentsCreate, resourceType, LOCAL);
    expect(variables).toEqual({
      ...FIXED,
      IDEMPOTENCY_TABLE: 'local-idempotency',
      PAYMENTS_TABLE: 'local-payments',
      DYNAMODB_ENDPOINT: 'http://127.0.0.1:8000',
      PROCESSOR_URL: 'http://127.0.0.1:4010',
      PROCESSOR_TIMEOUT_MS: '8000',
    });
    expect(substituted).toEqual(['IDEMPOTENCY_TABLE', 'PAYMENTS_TABLE', 'PROCESSOR_URL']);
    expect(overridden).toEqual([]);
  });

  it('gives the webhook secret itself where the template gives its ARN in Secrets Manager', () => {
    const { variables } = bundledEnvironment(webhookReceiver, resourceType, LOCAL);
    expect(variables.PROCESSOR_WEBHOOK_SECRET).toBe('whsec_local');
    expect(variables).not.toHaveProperty('PROCESSOR_WEBHOOK_SECRET_ARN');
    expect(variables.SQS_ENDPOINT).toBe('http://127.0.0.1:4566');
  });

  it('never gives a function a variable its template does not set, whatever the local stack knows', () => {
    const { variables } = bundledEnvironment(paymentsGet, resourceType, LOCAL);
    expect(Object.keys(variables).sort()).toEqual(
      [...Object.keys(FIXED), 'PAYMENTS_TABLE', 'DYNAMODB_ENDPOINT'].sort(),
    );
    const withoutTables = bundledEnvironment(deployed('Quiet', { ...FIXED }), resourceType, LOCAL);
    expect(withoutTables.variables).toEqual(FIXED);
  });

  it('replaces a value the template sets when told to, says so, and never adds one', () => {
    const overrides = {
      IDEMPOTENCY_LEASE_SECONDS: '4',
      PROCESSOR_TIMEOUT_MS: '2000',
      IDEMPOTENCY_TTL_SECONDS: '86400',
    };
    const create = bundledEnvironment(paymentsCreate, resourceType, LOCAL, overrides);
    expect(create.variables).toMatchObject({ IDEMPOTENCY_LEASE_SECONDS: '4', PROCESSOR_TIMEOUT_MS: '2000' });
    expect(create.overridden).toEqual(['IDEMPOTENCY_LEASE_SECONDS: 90 -> 4', 'PROCESSOR_TIMEOUT_MS: 8000 -> 2000']);
    const get = bundledEnvironment(paymentsGet, resourceType, LOCAL, overrides);
    expect(get.variables).not.toHaveProperty('PROCESSOR_TIMEOUT_MS');
  });

  it('refuses a value that refers to a resource with no local stand-in, naming the function and the variable', () => {
    const fn = deployed('Alerts', { ...FIXED, ALARM_TOPIC_ARN: { Ref: 'AlarmTopic' } });
    expect(() => bundledEnvironment(fn, resourceType, LOCAL)).toThrow(
      "Alerts's ALARM_TOPIC_ARN refers to AWS::SNS::Topic AlarmTopic, which exists only once deployed and has no " +
        'local stand-in',
    );
  });

  it('refuses a stand-in whose template value refers to another kind of resource', () => {
    const fn = deployed('Confused', { PAYMENTS_TABLE: { Ref: 'SettlementQueue4278E8AC' } });
    expect(() => bundledEnvironment(fn, resourceType, LOCAL)).toThrow(
      "Confused's PAYMENTS_TABLE should refer to an AWS::DynamoDB::Table, but the template has " +
        '{"Ref":"SettlementQueue4278E8AC"} (an AWS::SQS::Queue)',
    );
  });

  it('refuses to start a function whose stand-in the local stack has no value for', () => {
    const { SQS_ENDPOINT: _, ...withoutSqs } = LOCAL;
    expect(() => bundledEnvironment(webhookReceiver, resourceType, withoutSqs)).toThrow(
      "WebhookReceiver's SQS_ENDPOINT: the local stack has no value for it",
    );
  });

  it('connects a PostgreSQL function as its own database user with the local password, where AWS has the proxy', () => {
    const onPostgres = deployed('PaymentsGet', {
      ...FIXED,
      STORE: 'postgres',
      DATABASE_HOST: { 'Fn::GetAtt': ['DatabaseProxyE01FC4E6', 'Endpoint'] },
      DATABASE_PORT: '5432',
      DATABASE_NAME: 'keystone',
      DATABASE_USER: 'keystone_payments_get',
      DATABASE_SCHEMA: 'keystone',
    });
    const local = { ...LOCAL, DATABASE_URL: 'postgres://postgres:s3cret@127.0.0.1:5433/postgres' };
    const { variables, substituted } = bundledEnvironment(onPostgres, resourceType, local, {
      DATABASE_SCHEMA: 'test_schema',
    });
    expect(variables.DATABASE_URL).toBe('postgres://keystone_payments_get:s3cret@127.0.0.1:5433/postgres');
    expect(variables).not.toHaveProperty('DATABASE_HOST');
    expect(variables).toMatchObject({
      STORE: 'postgres',
      DATABASE_USER: 'keystone_payments_get',
      DATABASE_SCHEMA: 'test_schema',
    });
    expect(substituted).toEqual(['DATABASE_HOST']);
    // The proxy's endpoint is the one stand-in: a host that is not the proxy is refused.
    const elsewhere = deployed('PaymentsGet', { ...FIXED, DATABASE_HOST: { Ref: 'AlarmTopic' }, DATABASE_USER: 'u' });
    expect(() => bundledEnvironment(elsewhere, resourceType, local)).toThrow(/should refer to an AWS::RDS::DBProxy/);
  });
});
