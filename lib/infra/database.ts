import { CustomResource, Duration, Stack, Validations } from 'aws-cdk-lib';
import { Metric, type MetricOptions } from 'aws-cdk-lib/aws-cloudwatch';
import { type IVpc, Peer, Port, SecurityGroup } from 'aws-cdk-lib/aws-ec2';
import { type IGrantable, PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import type { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import {
  AuroraPostgresEngineVersion,
  type CfnDBCluster,
  ClusterInstance,
  DatabaseCluster,
  DatabaseClusterEngine,
  DatabaseProxy,
  DefaultAuthScheme,
  ProxyTarget,
} from 'aws-cdk-lib/aws-rds';
import { Construct } from 'constructs';
import { DATABASE_NAME, DATABASE_SCHEMA, type DatabaseRole } from '../tables/postgres-access';
import type { EnvironmentConfig } from './environments';
import { DATABASE_SUBNETS, FUNCTION_SUBNETS } from './network';
import { type FunctionNetwork, ServiceFunction } from './service-function';

/** PostgreSQL's port: the proxy listens on it whatever the cluster's port, and the cluster keeps it too. */
export const POSTGRES_PORT = 5432;

/** The Aurora PostgreSQL version: 17, a major version the local PostgreSQL tests bracket (15 and 18). */
export const AURORA_POSTGRES_VERSION = AuroraPostgresEngineVersion.VER_17_7;

/** The CloudFormation type of the migration's custom resource (the local stack reads its properties). */
export const MIGRATION_RESOURCE_TYPE = 'Custom::DatabaseMigration';

/** Lambda's Node.js runtime ships the RDS certificate authorities here; `NODE_EXTRA_CA_CERTS` makes Node trust them. */
const LAMBDA_AMAZON_CA_BUNDLE = '/var/runtime/ca-cert.pem';

export interface PaymentsDatabaseProps {
  readonly config: EnvironmentConfig;
  readonly vpc: IVpc;
  /** Every function's own role in the database, as the migration function creates it. */
  readonly roles: readonly DatabaseRole[];
}

/**
 * The service's database on Aurora PostgreSQL Serverless v2, and the one way in for the functions: RDS Proxy.
 *
 * - The cluster, in isolated subnets: storage encrypted, IAM database authentication on, TLS forced (`rds.force_ssl`),
 *   its admin password generated, kept and rotated by RDS itself in Secrets Manager (`manageMasterUserPassword`: no
 *   secret for us to rotate, and nothing but the migration function reads it). Deletion protection and retention as
 *   the environment says (dev deletes, staging and prod keep).
 * - The proxy, with end-to-end IAM authentication: a function signs a token with its own IAM role for its own
 *   database user, and the proxy signs in to the cluster as that same user with the proxy's role. No password exists
 *   for any function's user; TLS is required. Its pool is shared by every Lambda environment, so a burst of
 *   invocations opens client connections to the proxy, not backends on the cluster.
 * - The migration function (`functions/database-migration.ts`), a custom resource run on every deploy that changes the
 *   schema's inputs: the schema, each function's role and privileges, the migration's own code.
 *
 * Security groups admit exactly: the functions to the proxy, the proxy and the migration function to the cluster.
 */
export class PaymentsDatabase extends Construct {
  readonly cluster: DatabaseCluster;
  readonly proxy: DatabaseProxy;
  readonly proxySecurityGroup: SecurityGroup;
  readonly migration: ServiceFunction;
  readonly migrationResource: CustomResource;
  /** The cluster's admin secret, managed by RDS. */
  readonly adminSecretArn: string;
  private readonly config: EnvironmentConfig;
  private readonly vpc: IVpc;

  constructor(scope: Construct, id: string, props: PaymentsDatabaseProps) {
    super(scope, id);
    const { config, vpc, roles } = props;
    this.config = config;
    this.vpc = vpc;
    const { database } = config;

    const clusterSecurityGroup = new SecurityGroup(this, 'ClusterSecurityGroup', {
      vpc,
      description: `Aurora cluster (${config.name}): reached by the proxy and the migration function only`,
      allowAllOutbound: false,
    });
    this.cluster = new DatabaseCluster(this, 'Cluster', {
      engine: DatabaseClusterEngine.auroraPostgres({ version: AURORA_POSTGRES_VERSION }),
      writer: ClusterInstance.serverlessV2('Writer', { publiclyAccessible: false, autoMinorVersionUpgrade: true }),
      readers: Array.from({ length: database.readers }, (_, index) =>
        ClusterInstance.serverlessV2(`Reader${index + 1}`, {
          publiclyAccessible: false,
          autoMinorVersionUpgrade: true,
          // Sized like the writer, so that a failover lands on an instance ready for the writer's load.
          scaleWithWriter: true,
        }),
      ),
      serverlessV2MinCapacity: database.minCapacityAcu,
      serverlessV2MaxCapacity: database.maxCapacityAcu,
      vpc,
      vpcSubnets: DATABASE_SUBNETS,
      securityGroups: [clusterSecurityGroup],
      port: POSTGRES_PORT,
      defaultDatabaseName: DATABASE_NAME,
      manageMasterUserPassword: true,
      iamAuthentication: true,
      storageEncrypted: true,
      parameters: { 'rds.force_ssl': '1' },
      backup: { retention: Duration.days(database.backupRetentionDays) },
      deletionProtection: config.deletionProtection,
      removalPolicy: config.removalPolicy,
      copyTagsToSnapshot: true,
    });
    this.adminSecretArn = (this.cluster.node.defaultChild as CfnDBCluster).attrMasterUserSecretSecretArn;
    Validations.of(this.cluster).acknowledge({
      id: 'AwsSolutions-RDS11',
      reason:
        'The functions reach the database only through RDS Proxy, which listens on 5432 whatever the cluster port; ' +
        'the cluster is in isolated subnets and its security group admits the proxy and the migration function only, ' +
        'so another port would hide it from no one who could reach it.',
    });
    if (!config.deletionProtection) {
      Validations.of(this.cluster).acknowledge({
        id: 'AwsSolutions-RDS10',
        reason:
          `${config.name} is deleted with its stack (removal policy DESTROY), as its DynamoDB tables would be: ` +
          'deletion protection would make `cdk destroy` fail. Staging and prod have it on, and keep their data.',
      });
    }

    this.proxySecurityGroup = new SecurityGroup(this, 'ProxySecurityGroup', {
      vpc,
      description: `RDS Proxy (${config.name}): reached by the service functions only`,
      allowAllOutbound: false,
    });
    // The proxy's own role: with end-to-end IAM it signs in to the cluster as each function's user.
    const proxyRole = new Role(this, 'ProxyRole', {
      assumedBy: new ServicePrincipal('rds.amazonaws.com'),
      description: `RDS Proxy (${config.name}): connects to the cluster as the service's database users, with IAM`,
    });
    const { partition, region, account } = Stack.of(this);
    proxyRole.addToPrincipalPolicy(
      new PolicyStatement({
        actions: ['rds-db:connect'],
        resources: roles.map(
          (role) =>
            `arn:${partition}:rds-db:${region}:${account}:dbuser:${this.cluster.clusterResourceIdentifier}/${role.name}`,
        ),
      }),
    );
    this.proxy = new DatabaseProxy(this, 'Proxy', {
      proxyTarget: ProxyTarget.fromCluster(this.cluster),
      vpc,
      vpcSubnets: DATABASE_SUBNETS,
      securityGroups: [this.proxySecurityGroup],
      role: proxyRole,
      defaultAuthScheme: DefaultAuthScheme.IAM_AUTH,
      requireTLS: true,
      idleClientTimeout: Duration.seconds(database.proxy.idleClientTimeoutSeconds),
      borrowTimeout: Duration.seconds(database.proxy.borrowTimeoutSeconds),
      maxConnectionsPercent: database.proxy.maxConnectionsPercent,
      debugLogging: false,
    });

    const migrationSecurityGroup = this.functionSecurityGroup(
      'MigrationSecurityGroup',
      'the migration function: the cluster, and HTTPS for Secrets Manager and CloudFormation',
    );
    migrationSecurityGroup.addEgressRule(clusterSecurityGroup, Port.tcp(POSTGRES_PORT), 'the cluster, as its admin');
    clusterSecurityGroup.addIngressRule(migrationSecurityGroup, Port.tcp(POSTGRES_PORT), 'the migration function');
    this.migration = new ServiceFunction(this, 'Migration', {
      spec: {
        id: 'DatabaseMigration',
        entry: 'functions/database-migration.ts',
        description: "At deploy: applies the database schema and each function's role and privileges",
        memoryMb: 256,
      },
      // CloudFormation waits for the answer; the function answers before this runs out, whatever happens.
      timeoutSeconds: 300,
      config,
      environment: {
        DATABASE_HOST: this.cluster.clusterEndpoint.hostname,
        DATABASE_PORT: String(POSTGRES_PORT),
        DATABASE_NAME,
        DATABASE_ADMIN_SECRET_ARN: this.adminSecretArn,
        NODE_EXTRA_CA_CERTS: LAMBDA_AMAZON_CA_BUNDLE,
      },
      network: { vpc, subnets: FUNCTION_SUBNETS, securityGroup: migrationSecurityGroup },
    });
    this.migration.role.addToPrincipalPolicy(
      new PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [this.adminSecretArn] }),
    );
    const code = (this.migration.function.node.defaultChild as CfnFunction).code as CfnFunction.CodeProperty;
    this.migrationResource = new CustomResource(this, 'Schema', {
      serviceToken: this.migration.function.functionArn,
      resourceType: MIGRATION_RESOURCE_TYPE,
      properties: {
        Schema: DATABASE_SCHEMA,
        Roles: roles.map((role) => ({
          Name: role.name,
          Grants: role.grants.map((grant) => ({ Table: grant.table, Privileges: [...grant.privileges] })),
        })),
        // The bundle's asset hash: new migration code (a new keys-table migration, a new service table) runs on the
        // next deploy even when nothing else changed.
        CodeVersion: code.s3Key,
      },
    });
    // Once the instances are up (the cluster construct's children), not merely the cluster resource.
    this.migrationResource.node.addDependency(this.cluster);
  }

  /**
   * A security group for a function of this environment: HTTPS anywhere (the processor, the mailer, the AWS APIs) and
   * nothing else until a connection is allowed.
   */
  functionSecurityGroup(id: string, what: string): SecurityGroup {
    const group = new SecurityGroup(this, id, {
      vpc: this.vpc,
      description: `${what} (${this.config.name})`,
      allowAllOutbound: false,
    });
    group.addEgressRule(Peer.anyIpv4(), Port.tcp(443), 'HTTPS: the processor, the mailer and the AWS APIs');
    return group;
  }

  /** The network of a function that uses the database: its own security group, which may reach the proxy. */
  networkFor(functionId: string): FunctionNetwork {
    const group = this.functionSecurityGroup(`${functionId}SecurityGroup`, `${functionId} function`);
    group.addEgressRule(this.proxySecurityGroup, Port.tcp(POSTGRES_PORT), 'the database, through RDS Proxy');
    this.proxySecurityGroup.addIngressRule(group, Port.tcp(POSTGRES_PORT), `${functionId} function`);
    return { vpc: this.vpc, subnets: FUNCTION_SUBNETS, securityGroup: group };
  }

  /** `rds-db:connect` through the proxy, as this one database user only. */
  grantConnect(grantee: IGrantable, user: string): void {
    this.proxy.grantConnect(grantee, user);
  }

  /** One of the proxy's metrics (AWS/RDS, by proxy name), summed as AWS documents for its connection counts. */
  metricProxy(metricName: string, options: MetricOptions = {}): Metric {
    return new Metric({
      namespace: 'AWS/RDS',
      metricName,
      dimensionsMap: { ProxyName: this.proxy.dbProxyName },
      statistic: 'Sum',
      ...options,
    });
  }

  /** One of the cluster's metrics (AWS/RDS, by cluster identifier). */
  metricCluster(metricName: string, options: MetricOptions = {}): Metric {
    return this.cluster.metric(metricName, options);
  }
}
