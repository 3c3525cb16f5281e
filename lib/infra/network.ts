import { FlowLogDestination, FlowLogTrafficType, IpAddresses, SubnetType, Vpc } from 'aws-cdk-lib/aws-ec2';
import { LogGroup } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import type { EnvironmentConfig } from './environments';

/** The functions' subnets: private, with a route to the internet through NAT. */
export const FUNCTION_SUBNETS = { subnetType: SubnetType.PRIVATE_WITH_EGRESS } as const;
/** The database's and the proxy's subnets: no route out of the VPC at all. */
export const DATABASE_SUBNETS = { subnetType: SubnetType.PRIVATE_ISOLATED } as const;

/**
 * The VPC of an environment on PostgreSQL, in two availability zones (Aurora and RDS Proxy need subnets in two):
 *
 * - isolated subnets for the cluster and the proxy: nothing there can reach, or be reached from, outside the VPC;
 * - private subnets for the functions, with NAT: they call the payment processor and the mailer on the internet, and
 *   the AWS APIs they use (SQS, Secrets Manager, CloudWatch, X-Ray) through their public endpoints. Interface
 *   endpoints would keep that traffic off the NAT, but each costs about $15 a month across two zones, more than this
 *   service's NAT data charges at its volumes; the processor and the mailer need the NAT regardless;
 * - public subnets holding only the NAT gateways;
 * - flow logs of all traffic (accepted and rejected) to a log group kept as long as the environment's logs.
 *
 * The default security group is emptied of rules (CDK's `restrictDefaultSecurityGroup`): every resource here has a
 * security group of its own, and one placed in the default group by mistake reaches nothing.
 */
export class ServiceNetwork extends Construct {
  readonly vpc: Vpc;

  constructor(scope: Construct, id: string, config: EnvironmentConfig) {
    super(scope, id);
    const flowLogs = new LogGroup(this, 'FlowLogs', {
      retention: config.logRetention,
      removalPolicy: config.removalPolicy,
    });
    this.vpc = new Vpc(this, 'Vpc', {
      ipAddresses: IpAddresses.cidr('10.40.0.0/16'),
      maxAzs: 2,
      natGateways: config.database.natGateways,
      subnetConfiguration: [
        { name: 'nat', subnetType: SubnetType.PUBLIC, cidrMask: 26 },
        { name: 'functions', subnetType: FUNCTION_SUBNETS.subnetType, cidrMask: 20 },
        { name: 'database', subnetType: DATABASE_SUBNETS.subnetType, cidrMask: 24 },
      ],
      restrictDefaultSecurityGroup: true,
      flowLogs: {
        all: { destination: FlowLogDestination.toCloudWatchLogs(flowLogs), trafficType: FlowLogTrafficType.ALL },
      },
    });
  }
}
