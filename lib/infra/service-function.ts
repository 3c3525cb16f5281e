import * as path from 'node:path';
import { Duration, Validations } from 'aws-cdk-lib';
import type { ISecurityGroup, IVpc, SubnetSelection } from 'aws-cdk-lib/aws-ec2';
import { PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Architecture, type DurableConfig, Runtime, Tracing } from 'aws-cdk-lib/aws-lambda';
import { type BundlingOptions, NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import type { EnvironmentConfig, StoreKind } from './environments';
import type { FunctionSpec } from './functions';
import { BUNDLE_CONDITIONS } from './library-source';
import { localEsbuildVersion } from './local-esbuild';

/** Every function's runtime; esbuild's target follows from it (node22). */
export const LAMBDA_RUNTIME = Runtime.NODEJS_22_X;

/** The repository root: handler entries are relative to it, and esbuild runs from it. */
const PROJECT_ROOT = path.resolve(__dirname, '..', '..');

/**
 * One bundle per function, built by the locally installed esbuild (never docker), as an ES module.
 *
 * - The AWS SDK v3 is bundled, not taken from the runtime: the functions then run the exact SDK version that
 *   package-lock.json pins and the tests ran against, not whichever one the Lambda runtime ships this month.
 * - `mainFields: ['module', 'main']` resolves the SDK's ES module builds: a smaller bundle and a faster cold start.
 * - ESM output has no `require`, and some bundled CommonJS code still calls it (`require("node:https")`): the banner
 *   gives the module one.
 * - Minified with a source map; `NODE_OPTIONS=--enable-source-maps` (set on the function) maps stack traces back.
 */
/** Powertools' own switch; lib/runtime/tracing.ts reads it, and only creates a Tracer when it is "true". */
export const TRACE_ENABLED_ENV = 'POWERTOOLS_TRACE_ENABLED';

/** Source maps on stack traces: every function gets it. */
export const LAMBDA_NODE_OPTIONS = { NODE_OPTIONS: '--enable-source-maps' } as const;

export const LAMBDA_BUNDLING: BundlingOptions = {
  format: OutputFormat.ESM,
  mainFields: ['module', 'main'],
  banner: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
  bundleAwsSDK: true,
  minify: true,
  sourceMap: true,
  // Positions only: a stack trace maps to the TypeScript file and line without the sources themselves, and the map
  // Node reads and parses at every cold start (--enable-source-maps) is about a third of the size.
  sourcesContent: false,
  forceDockerBundling: false,
  // The library by name, to its sources (its package.json's `keystone-source` condition; tsconfig.json says why),
  // and `module`, which esbuild drops once a condition is named: the SDK's tree-shakable builds (library-source.ts).
  esbuildArgs: { '--conditions': BUNDLE_CONDITIONS.join(',') },
  define: { ...tracingDefine(false), ...storeDefine('dynamodb') },
};

/**
 * The tracing switch as a bundle-time constant: esbuild replaces `process.env.POWERTOOLS_TRACE_ENABLED` with this
 * literal, so that functions in an environment without tracing carry none of the tracer's code (see tracing.ts).
 */
function tracingDefine(enabled: boolean): Record<string, string> {
  return { [`process.env.${TRACE_ENABLED_ENV}`]: JSON.stringify(String(enabled)) };
}

/**
 * The store as a bundle-time constant, the same way: lib/payments/config.ts loads only the store the environment
 * runs on, so a DynamoDB function carries no PostgreSQL driver (about 100 KB minified) and a PostgreSQL one no
 * DynamoDB client.
 */
export function storeDefine(store: StoreKind): Record<string, string> {
  return { 'process.env.STORE': JSON.stringify(store) };
}

/** The bundling options for an environment: LAMBDA_BUNDLING, with tracing compiled in or out, for its store. */
export function lambdaBundling(config: Pick<EnvironmentConfig, 'tracing' | 'store'>): BundlingOptions {
  return { ...LAMBDA_BUNDLING, define: { ...tracingDefine(config.tracing), ...storeDefine(config.store) } };
}

/** Where a function in a VPC runs: its subnets, and its own security group (what it may reach). */
export interface FunctionNetwork {
  readonly vpc: IVpc;
  readonly subnets: SubnetSelection;
  readonly securityGroup: ISecurityGroup;
}

export interface ServiceFunctionProps {
  /** What to bundle and how to describe it: a service function's spec, or a maintenance function's equivalent. */
  readonly spec: Pick<FunctionSpec, 'id' | 'entry' | 'description' | 'memoryMb'>;
  readonly timeoutSeconds: number;
  readonly config: EnvironmentConfig;
  /** The function's environment, except NODE_OPTIONS and POWERTOOLS_TRACE_ENABLED which every function gets. */
  readonly environment: Readonly<Record<string, string>>;
  /** In a VPC (the environment's database is in one), or not. */
  readonly network?: FunctionNetwork;
  /** A Lambda durable function: its executions' timeout and how long Lambda keeps a closed one's history. */
  readonly durableConfig?: DurableConfig;
}

/**
 * What Lambda does with a VPC function's execution role: create, describe and delete the function's network
 * interfaces in its subnets. AWS's AWSLambdaVPCAccessExecutionRole, written inline: no managed policy is attached
 * (cdk-nag IAM4), and nothing else comes with it.
 */
const VPC_NETWORK_INTERFACE_ACTIONS = [
  'ec2:CreateNetworkInterface',
  'ec2:DescribeNetworkInterfaces',
  'ec2:DescribeSubnets',
  'ec2:DeleteNetworkInterface',
  'ec2:AssignPrivateIpAddresses',
  'ec2:UnassignPrivateIpAddresses',
];

/**
 * A Lambda function from a `FunctionSpec`, with its own log group and its own role.
 *
 * The role starts empty apart from writing to that one log group: CDK's default role attaches
 * AWSLambdaBasicExecutionRole, which may create and write any log group in the account (cdk-nag IAM4). Everything
 * else the function may do is granted by the stack from the spec.
 */
export class ServiceFunction extends Construct {
  readonly function: NodejsFunction;
  readonly role: Role;
  readonly logGroup: LogGroup;

  constructor(
    scope: Construct,
    id: string,
    { spec, timeoutSeconds, config, environment, network, durableConfig }: ServiceFunctionProps,
  ) {
    super(scope, id);
    // Before NodejsFunction, which would otherwise fall back to bundling in Docker.
    localEsbuildVersion(PROJECT_ROOT);
    this.logGroup = new LogGroup(this, 'Logs', {
      retention: config.logRetention,
      removalPolicy: config.removalPolicy,
    });
    this.role = new Role(this, 'Role', {
      assumedBy: new ServicePrincipal('lambda.amazonaws.com'),
      description: `${spec.id} function (${config.name})`,
    });
    this.logGroup.grantWrite(this.role);
    if (network) {
      this.role.addToPrincipalPolicy(new PolicyStatement({ actions: VPC_NETWORK_INTERFACE_ACTIONS, resources: ['*'] }));
    }

    this.function = new NodejsFunction(this, 'Function', {
      entry: path.join(PROJECT_ROOT, spec.entry),
      handler: 'handler',
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: path.join(PROJECT_ROOT, 'package-lock.json'),
      description: spec.description,
      runtime: LAMBDA_RUNTIME,
      architecture: Architecture.ARM_64,
      memorySize: spec.memoryMb,
      timeout: Duration.seconds(timeoutSeconds),
      role: this.role,
      logGroup: this.logGroup,
      tracing: config.tracing ? Tracing.ACTIVE : Tracing.DISABLED,
      reservedConcurrentExecutions: config.concurrency.reserved[spec.id],
      environment: { ...LAMBDA_NODE_OPTIONS, [TRACE_ENABLED_ENV]: String(config.tracing), ...environment },
      bundling: lambdaBundling(config),
      ...(network ? { vpc: network.vpc, vpcSubnets: network.subnets, securityGroups: [network.securityGroup] } : {}),
      ...(durableConfig ? { durableConfig } : {}),
    });

    Validations.of(this.function).acknowledge({
      id: 'AwsSolutions-L1',
      reason:
        'nodejs22.x is the runtime this code is built (esbuild target node22) and tested for; moving to a newer ' +
        'runtime is a deliberate upgrade with its own test run, not something a CDK release should do for us.',
    });
    // One acknowledgement per role, naming every action that needs "*" and why.
    const everywhere = [
      ...(config.tracing
        ? [
            'Active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level ' +
              'permissions, so they can only be granted on "*".',
          ]
        : []),
      ...(network
        ? [
            "In a VPC: Lambda creates, describes and deletes the function's network interfaces with its role; the " +
              "interfaces do not exist before Lambda creates them and EC2's Describe actions take no resource, so " +
              'these are granted on "*" (AWS\'s own AWSLambdaVPCAccessExecutionRole, inline).',
          ]
        : []),
    ];
    if (everywhere.length > 0) {
      Validations.of(this.role).acknowledge({
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason: `${everywhere.join(' ')} The tests pin that no other action gets "*".`,
      });
    }
  }
}
