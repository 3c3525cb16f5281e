import { Validations } from 'aws-cdk-lib';
import { Annotations, Match, type Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { MIGRATION_RESOURCE_TYPE } from '../../lib/infra/database';
import type { PaymentsStack } from '../../lib/infra/payments-stack';
import { type CfnResourceJson, resourceOf, type SynthesizedApp, synthesize, TESTED_ENVIRONMENTS } from './synth';

/**
 * An environment with `store: 'postgres'` (or any with `-c store=postgres`): the same functions, in a VPC, on Aurora
 * PostgreSQL Serverless v2 behind RDS Proxy with IAM authentication. The template's shape only: nothing is bundled
 * here (test/bundled runs the PostgreSQL bundles).
 *
 * The brief's access table, written out rather than read from `functions.ts`, so that a change to a function's
 * privileges has to change this test too: each function's database user and its privileges per table.
 */
const KEYS = ['SELECT', 'INSERT', 'UPDATE'];
const SQL_ACCESS: Record<string, { user: string; grants: Record<string, string[]> }> = {
  PaymentsCreate: { user: 'keystone_payments_create', grants: { idempotency_keys: KEYS, payments: ['INSERT'] } },
  PaymentsGet: { user: 'keystone_payments_get', grants: { payments: ['SELECT'] } },
  OrdersCreate: {
    user: 'keystone_orders_create',
    grants: {
      idempotency_keys: KEYS,
      orders: ['INSERT', 'UPDATE'],
      reservations: ['INSERT', 'UPDATE'],
      inventory: ['SELECT', 'UPDATE'],
    },
  },
  OrdersGet: { user: 'keystone_orders_get', grants: { orders: ['SELECT'] } },
  InventoryGet: { user: 'keystone_inventory_get', grants: { inventory: ['SELECT'] } },
  Authorizer: { user: 'keystone_authorizer', grants: { api_keys: ['SELECT'] } },
  WebhookReceiver: { user: 'keystone_webhook_receiver', grants: { idempotency_keys: KEYS } },
  SettlementConsumer: {
    user: 'keystone_settlement_consumer',
    grants: { idempotency_keys: KEYS, payments: ['SELECT', 'INSERT', 'UPDATE'] },
  },
  PaymentsCompleter: {
    user: 'keystone_payments_completer',
    grants: {
      idempotency_keys: ['SELECT', 'UPDATE', 'DELETE'],
      payments: ['SELECT', 'INSERT'],
      orders: ['UPDATE'],
      reservations: ['UPDATE'],
      inventory: ['SELECT', 'UPDATE'],
    },
  },
};
const FUNCTION_IDS = Object.keys(SQL_ACCESS);

let synthesized: SynthesizedApp;
beforeAll(() => {
  synthesized = synthesize({ bundle: false, store: 'postgres' });
});
afterAll(() => synthesized?.dispose());

type Env = (typeof TESTED_ENVIRONMENTS)[number];

function each(check: (stack: PaymentsStack, template: Template, env: Env) => void): void {
  for (const env of TESTED_ENVIRONMENTS) check(synthesized.stacks[env], synthesized.templates[env], env);
}

function l1(construct: { node: { defaultChild?: unknown } }): never {
  return construct.node.defaultChild as never;
}

function databaseOf(stack: PaymentsStack) {
  if (!stack.database) throw new Error(`${stack.stackName} has no database`);
  return stack.database;
}

function functionResource(stack: PaymentsStack, template: Template, id: string): CfnResourceJson {
  return resourceOf(template, stack, l1(stack.functions.get(id)!.function));
}

function environmentOf(fn: CfnResourceJson): Record<string, unknown> {
  return (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
}

interface Statement {
  readonly Action: string | string[];
  readonly Resource: unknown;
}

/** Every statement of every policy attached to a role, by the role's logical id. */
function statementsOfRole(template: Template, roleId: string): Statement[] {
  return Object.values(template.findResources('AWS::IAM::Policy'))
    .filter((policy) => JSON.stringify(policy.Properties.Roles).includes(`"${roleId}"`))
    .flatMap((policy) => policy.Properties.PolicyDocument.Statement as Statement[]);
}

function actions(statement: Statement): string[] {
  return ([] as string[]).concat(statement.Action);
}

describe('the payments stack on PostgreSQL', () => {
  describe('data', () => {
    it('creates no DynamoDB table: payments, API keys and idempotency keys all live in PostgreSQL', () => {
      each((stack, template) => {
        template.resourceCountIs('AWS::DynamoDB::Table', 0);
        expect(() => stack.tables).toThrow(/PostgreSQL: it has no DynamoDB table/);
        // The rest of the service stays: queues, API, WAF, the completer's schedule, the webhook secret.
        template.resourceCountIs('AWS::SQS::Queue', 2);
        template.resourceCountIs('AWS::ApiGateway::RestApi', 1);
        template.resourceCountIs('AWS::WAFv2::WebACL', 1);
        template.resourceCountIs('AWS::Events::Rule', 1);
        template.resourceCountIs('AWS::SecretsManager::Secret', 1);
      });
    });

    it('runs Aurora PostgreSQL 17 Serverless v2 in the capacity range of each environment', () => {
      const capacity = { dev: { MinCapacity: 0.5, MaxCapacity: 2 }, prod: { MinCapacity: 1, MaxCapacity: 16 } };
      const instances = { dev: 1, prod: 2 };
      each((stack, template, env) => {
        template.resourceCountIs('AWS::RDS::DBCluster', 1);
        template.hasResourceProperties('AWS::RDS::DBCluster', {
          Engine: 'aurora-postgresql',
          EngineVersion: Match.stringLikeRegexp('^17\\.'),
          ServerlessV2ScalingConfiguration: capacity[env],
          DatabaseName: 'keystone',
          Port: 5432,
        });
        template.resourceCountIs('AWS::RDS::DBInstance', instances[env]);
        template.allResourcesProperties('AWS::RDS::DBInstance', {
          DBInstanceClass: 'db.serverless',
          PubliclyAccessible: false,
          DBClusterIdentifier: { Ref: stack.getLogicalId(l1(databaseOf(stack).cluster)) },
        });
      });
    });

    it('encrypts storage, forces TLS, turns IAM authentication on, and lets RDS keep and rotate the admin password', () => {
      each((_, template) => {
        template.hasResourceProperties('AWS::RDS::DBCluster', {
          StorageEncrypted: true,
          EnableIAMDatabaseAuthentication: true,
          ManageMasterUserPassword: true,
          MasterUserPassword: Match.absent(),
        });
        template.hasResourceProperties('AWS::RDS::DBClusterParameterGroup', {
          Family: 'aurora-postgresql17',
          Parameters: { 'rds.force_ssl': '1' },
        });
      });
    });

    it('keeps prod’s cluster behind deletion protection and retains it, and lets dev’s go', () => {
      const { dev, prod } = synthesized.templates;
      prod.hasResource('AWS::RDS::DBCluster', {
        DeletionPolicy: 'Retain',
        UpdateReplacePolicy: 'Retain',
        Properties: Match.objectLike({ DeletionProtection: true, BackupRetentionPeriod: 35 }),
      });
      dev.hasResource('AWS::RDS::DBCluster', {
        DeletionPolicy: 'Delete',
        Properties: Match.objectLike({ DeletionProtection: false, BackupRetentionPeriod: 1 }),
      });
    });
  });

  describe('RDS Proxy', () => {
    it('requires IAM authentication end to end and TLS, with no secret for any user', () => {
      each((_, template) => {
        template.resourceCountIs('AWS::RDS::DBProxy', 1);
        template.hasResourceProperties('AWS::RDS::DBProxy', {
          EngineFamily: 'POSTGRESQL',
          DefaultAuthScheme: 'IAM_AUTH',
          RequireTLS: true,
          Auth: Match.absent(),
          DebugLogging: false,
          IdleClientTimeout: 600,
        });
      });
    });

    it('targets the cluster, waits at most 3 s for a connection, and leaves 10% of them to the cluster', () => {
      each((stack, template) => {
        template.hasResourceProperties('AWS::RDS::DBProxyTargetGroup', {
          DBClusterIdentifiers: [{ Ref: stack.getLogicalId(l1(databaseOf(stack).cluster)) }],
          ConnectionPoolConfigurationInfo: { ConnectionBorrowTimeout: 3, MaxConnectionsPercent: 90 },
        });
      });
    });

    it("signs in to the cluster as each function's database user and no other", () => {
      each((stack, template) => {
        const proxy = resourceOf(template, stack, l1(databaseOf(stack).proxy));
        const roleId = (proxy.Properties.RoleArn as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
        const statements = statementsOfRole(template, roleId);
        expect(statements.flatMap(actions)).toEqual(['rds-db:connect']);
        const resources = ([] as unknown[]).concat(statements[0]!.Resource).map((r) => JSON.stringify(r));
        const clusterResourceId = JSON.stringify(
          stack.resolve(databaseOf(stack).cluster.clusterResourceIdentifier),
        ).slice(1, -1);
        expect(resources).toHaveLength(FUNCTION_IDS.length);
        for (const { user } of Object.values(SQL_ACCESS)) {
          expect(resources.filter((r) => r.includes(clusterResourceId) && r.includes(`/${user}"`))).toHaveLength(1);
        }
      });
    });
  });

  describe('functions', () => {
    it('runs every function in the private subnets, with its own security group', () => {
      each((stack, template) => {
        const network = stack.network!.vpc.selectSubnets({ subnetGroupName: 'functions' }).subnetIds;
        const groups = new Set<string>();
        for (const id of FUNCTION_IDS) {
          const vpcConfig = functionResource(stack, template, id).Properties.VpcConfig as {
            SubnetIds: unknown[];
            SecurityGroupIds: unknown[];
          };
          expect(vpcConfig.SubnetIds).toEqual(network.map((subnet) => stack.resolve(subnet)));
          expect(vpcConfig.SecurityGroupIds).toHaveLength(1);
          groups.add(JSON.stringify(vpcConfig.SecurityGroupIds[0]));
        }
        expect(groups.size).toBe(FUNCTION_IDS.length);
      });
    });

    it('tells each function the proxy, the database, the schema and its own user, no prepared statements (RDS Proxy would pin them), and no table name', () => {
      each((stack, template) => {
        const proxyEndpoint = stack.resolve(databaseOf(stack).proxy.endpoint);
        for (const id of FUNCTION_IDS) {
          const environment = environmentOf(functionResource(stack, template, id));
          expect(environment).toMatchObject({
            STORE: 'postgres',
            DATABASE_HOST: proxyEndpoint,
            DATABASE_PORT: '5432',
            DATABASE_NAME: 'keystone',
            DATABASE_SCHEMA: 'keystone',
            DATABASE_USER: SQL_ACCESS[id]!.user,
            DATABASE_PREPARED_STATEMENTS: 'false',
          });
          expect(environment.IDEMPOTENCY_TABLE).toBeUndefined();
          expect(environment.PAYMENTS_TABLE).toBeUndefined();
          expect(environment.DATABASE_URL).toBeUndefined();
        }
      });
    });

    it('grants each function rds-db:connect through the proxy as its own user, and nothing on DynamoDB', () => {
      each((stack, template) => {
        const proxyId = stack.getLogicalId(l1(databaseOf(stack).proxy));
        for (const id of FUNCTION_IDS) {
          const roleId = stack.getLogicalId(l1(stack.functions.get(id)!.role));
          const statements = statementsOfRole(template, roleId);
          const connects = statements.filter((statement) => actions(statement).includes('rds-db:connect'));
          expect(connects).toHaveLength(1);
          expect(actions(connects[0]!)).toEqual(['rds-db:connect']);
          const resource = JSON.stringify(connects[0]!.Resource);
          expect(resource).toContain(`"${proxyId}"`);
          expect(resource).toContain(`/${SQL_ACCESS[id]!.user}"`);
          expect(statements.flatMap(actions).filter((action) => action.startsWith('dynamodb:'))).toEqual([]);
          // "*" only where no resource can be named: the network interfaces of a VPC function, and X-Ray.
          const everywhere = statements.filter((statement) => JSON.stringify(statement.Resource) === '"*"');
          for (const action of everywhere.flatMap(actions)) expect(action).toMatch(/^(ec2|xray):/);
        }
      });
    });

    it('lets a function reach the proxy and HTTPS only, and the proxy be reached by the functions only', () => {
      each((stack, template) => {
        const database = databaseOf(stack);
        const proxyGroup = stack.getLogicalId(l1(database.proxySecurityGroup));
        const functionGroups = FUNCTION_IDS.map((id) => {
          const { SecurityGroupIds } = functionResource(stack, template, id).Properties.VpcConfig as {
            SecurityGroupIds: { 'Fn::GetAtt': [string, string] }[];
          };
          return SecurityGroupIds[0]!['Fn::GetAtt'][0];
        });
        for (const group of functionGroups) {
          const own = template.toJSON().Resources[group] as CfnResourceJson;
          expect(own.Properties.SecurityGroupEgress).toEqual([
            expect.objectContaining({ CidrIp: '0.0.0.0/0', FromPort: 443, ToPort: 443, IpProtocol: 'tcp' }),
          ]);
          template.hasResourceProperties('AWS::EC2::SecurityGroupEgress', {
            GroupId: { 'Fn::GetAtt': [group, 'GroupId'] },
            DestinationSecurityGroupId: { 'Fn::GetAtt': [proxyGroup, 'GroupId'] },
            FromPort: 5432,
            ToPort: 5432,
          });
        }
        const proxyIngress = Object.values(
          template.findResources('AWS::EC2::SecurityGroupIngress', {
            Properties: { GroupId: { 'Fn::GetAtt': [proxyGroup, 'GroupId'] } },
          }),
        ).map((rule) => (rule.Properties.SourceSecurityGroupId as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0]);
        expect(proxyIngress.sort()).toEqual([...functionGroups].sort());
      });
    });
  });

  describe('the migration', () => {
    function migration(template: Template): CfnResourceJson {
      const resources = Object.values(template.findResources(MIGRATION_RESOURCE_TYPE)) as CfnResourceJson[];
      expect(resources).toHaveLength(1);
      return resources[0]!;
    }

    it("is a custom resource run by the migration function, with every function's role and privileges", () => {
      each((stack, template) => {
        const database = databaseOf(stack);
        const resource = migration(template);
        const migrationFunction = stack.getLogicalId(l1(database.migration.function));
        expect(resource.Properties.ServiceToken).toEqual({ 'Fn::GetAtt': [migrationFunction, 'Arn'] });
        expect(resource.Properties.Schema).toBe('keystone');
        expect(resource.Properties.Roles).toEqual(
          FUNCTION_IDS.map((id) => ({
            Name: SQL_ACCESS[id]!.user,
            Grants: Object.entries(SQL_ACCESS[id]!.grants).map(([table, privileges]) => ({
              Table: table,
              Privileges: privileges,
            })),
          })),
        );
        // New migration code runs on the next deploy: its bundle's key is one of the properties.
        const code = (template.toJSON().Resources[migrationFunction] as CfnResourceJson).Properties.Code as {
          S3Key: string;
        };
        expect(code.S3Key).toMatch(/^[0-9a-f]{64}\.zip$/);
        expect(resource.Properties.CodeVersion).toBe(code.S3Key);
      });
    });

    it('runs once the cluster’s instances are up, and before any function that uses the schema exists', () => {
      each((stack, template) => {
        const database = databaseOf(stack);
        const [logicalId] = Object.keys(template.findResources(MIGRATION_RESOURCE_TYPE));
        const dependsOn = (template.toJSON().Resources[logicalId!] as CfnResourceJson).DependsOn ?? [];
        for (const instance of Object.keys(template.findResources('AWS::RDS::DBInstance'))) {
          expect(dependsOn).toContain(instance);
        }
        expect(dependsOn).toContain(stack.getLogicalId(l1(database.cluster)));
        for (const id of FUNCTION_IDS) {
          expect(functionResource(stack, template, id).DependsOn).toContain(logicalId);
        }
      });
    });

    it('connects to the cluster directly as the admin, over verified TLS, reading only the admin secret', () => {
      each((stack, template) => {
        const database = databaseOf(stack);
        const fn = resourceOf(template, stack, l1(database.migration.function));
        const clusterId = stack.getLogicalId(l1(database.cluster));
        const secretArn = { 'Fn::GetAtt': [clusterId, 'MasterUserSecret.SecretArn'] };
        expect(environmentOf(fn)).toMatchObject({
          DATABASE_HOST: { 'Fn::GetAtt': [clusterId, 'Endpoint.Address'] },
          DATABASE_ADMIN_SECRET_ARN: secretArn,
          NODE_EXTRA_CA_CERTS: '/var/runtime/ca-cert.pem',
        });
        const roleId = stack.getLogicalId(l1(database.migration.role));
        const reads = statementsOfRole(template, roleId).filter((s) =>
          actions(s).includes('secretsmanager:GetSecretValue'),
        );
        expect(reads.map((s) => s.Resource)).toEqual([secretArn]);
        // No service function may read it.
        for (const id of FUNCTION_IDS) {
          const role = stack.getLogicalId(l1(stack.functions.get(id)!.role));
          expect(JSON.stringify(statementsOfRole(template, role))).not.toContain('MasterUserSecret');
        }
      });
    });

    it('is the only way into the cluster besides the proxy', () => {
      each((stack, template) => {
        const database = databaseOf(stack);
        const [clusterGroup] = (
          resourceOf(template, stack, l1(database.cluster)).Properties.VpcSecurityGroupIds as {
            'Fn::GetAtt': [string, string];
          }[]
        ).map((group) => group['Fn::GetAtt'][0]);
        const sources = Object.values(
          template.findResources('AWS::EC2::SecurityGroupIngress', {
            Properties: { GroupId: { 'Fn::GetAtt': [clusterGroup, 'GroupId'] } },
          }),
        ).map((rule) => (rule.Properties.SourceSecurityGroupId as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0]);
        const migrationGroup = (
          resourceOf(template, stack, l1(database.migration.function)).Properties.VpcConfig as {
            SecurityGroupIds: { 'Fn::GetAtt': [string, string] }[];
          }
        ).SecurityGroupIds[0]!['Fn::GetAtt'][0];
        expect(sources.sort()).toEqual([stack.getLogicalId(l1(database.proxySecurityGroup)), migrationGroup].sort());
      });
    });
  });

  describe('network', () => {
    it('spans two zones, with one NAT gateway in dev and one per zone in prod, and logs all its traffic', () => {
      const nat = { dev: 1, prod: 2 };
      each((_, template, env) => {
        template.resourceCountIs('AWS::EC2::VPC', 1);
        template.resourceCountIs('AWS::EC2::NatGateway', nat[env]);
        template.resourceCountIs('AWS::EC2::Subnet', 6);
        template.hasResourceProperties('AWS::EC2::FlowLog', {
          TrafficType: 'ALL',
          LogDestinationType: 'cloud-watch-logs',
        });
      });
    });
  });

  describe('alarms and dashboard', () => {
    it('alarms on the proxy’s and the cluster’s connections and on deadlocks, on the environment’s topic', () => {
      each((stack, template) => {
        const topic = stack.resolve(stack.alarms.topic.topicArn);
        const named = (part: string) =>
          Object.values(template.findResources('AWS::CloudWatch::Alarm')).filter((alarm) =>
            JSON.stringify(alarm.Properties.AlarmName).includes(part),
          );
        for (const [name, metric, threshold] of [
          ['database proxy connections', 'MaxDatabaseConnectionsAllowed', 80],
          ['database connections', 'DatabaseConnections', 90],
          ['database deadlocks', 'Deadlocks', 0.01],
        ] as const) {
          const [alarm, ...others] = named(name);
          expect(others).toHaveLength(0);
          expect(alarm!.Properties.Threshold).toBe(threshold);
          expect(alarm!.Properties.AlarmActions).toEqual([topic]);
          expect(alarm!.Properties.OKActions).toEqual([topic]);
          expect(JSON.stringify(alarm!.Properties)).toContain(`"${metric}"`);
        }
      });
    });

    it('shows the database’s connections, pinned ones apart, capacity, deadlocks and latencies', () => {
      each((_, template) => {
        const [dashboard] = Object.values(template.findResources('AWS::CloudWatch::Dashboard'));
        const body = JSON.stringify(dashboard!.Properties.DashboardBody);
        for (const metric of [
          'DatabaseConnectionsCurrentlySessionPinned',
          'ClientConnections',
          'ServerlessDatabaseCapacity',
          'Deadlocks',
          'DatabaseConnectionsBorrowLatency',
        ]) {
          expect(body).toContain(metric);
        }
      });
    });
  });

  describe('synthesis', () => {
    it.each(TESTED_ENVIRONMENTS)('passes cdk-nag’s AWS Solutions checks in %s', (env) => {
      const report = new AwsSolutionsChecks().validateScope(synthesized.stacks[env]);
      const findings = report.violations.map(
        (violation) =>
          `${violation.severity} ${violation.ruleName} at ${violation.violatingResources.map((r) => r.constructPath)}`,
      );
      expect(findings).toEqual([]);
    });

    it('acknowledges only these findings besides the DynamoDB stack’s, each with its reason', () => {
      const acknowledged = (env: Env) => {
        const found = new Map<string, string[]>();
        for (const construct of synthesized.stacks[env].node.findAll()) {
          for (const entry of construct.node.metadata) {
            if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
            for (const [id, reason] of Object.entries(entry.data as Record<string, string>)) {
              // cdk-nag's rules only: CDK acknowledges a few of its own CloudFormation checks (the VPC's literal
              // zones, the flow log's option names).
              const rule = id.replace(/^annotation::/i, '');
              if (rule.startsWith('AwsSolutions-')) found.set(rule, [...(found.get(rule) ?? []), reason]);
            }
          }
        }
        return found;
      };
      const prod = acknowledged('prod');
      const dev = acknowledged('dev');
      // RDS11: the cluster's port (the proxy is the way in). RDS10, deletion protection, in dev only (dev deletes).
      expect([...prod.keys()].sort()).toEqual([
        'AwsSolutions-APIG4',
        'AwsSolutions-COG4',
        'AwsSolutions-IAM5[Resource::*]',
        'AwsSolutions-L1',
        'AwsSolutions-RDS11',
        'AwsSolutions-SMG4',
      ]);
      expect([...dev.keys()].filter((id) => !prod.has(id))).toEqual(['AwsSolutions-RDS10']);
      // Every VPC function's role says why it needs "*" for its network interfaces (and in prod, for X-Ray).
      const vpcReasons = prod.get('AwsSolutions-IAM5[Resource::*]')!;
      expect(vpcReasons).toHaveLength(FUNCTION_IDS.length + 1); // and the migration function
      for (const reason of vpcReasons) expect(reason).toMatch(/network interfaces.*X-Ray|xray.*network interfaces/is);
      for (const reason of dev.get('AwsSolutions-IAM5[Resource::*]')!) expect(reason).not.toMatch(/xray/i);
    });

    it.each(TESTED_ENVIRONMENTS)('leaves no warning on any construct of %s', (env) => {
      const warnings = Annotations.fromStack(synthesized.stacks[env]).findWarning('*', Match.anyValue());
      expect(warnings.map((warning) => `${warning.id}: ${JSON.stringify(warning.entry.data)}`)).toEqual([]);
    });
  });
});
