import * as path from 'node:path';
import { Duration, Validations } from 'aws-cdk-lib';
import { Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Architecture, Runtime, Tracing } from 'aws-cdk-lib/aws-lambda';
import { type BundlingOptions, NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import type { EnvironmentConfig } from './environments';
import type { FunctionSpec } from './functions';
import { localEsbuildVersion } from './local-esbuild';
import { functionTimeoutSeconds } from './timing';

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
  forceDockerBundling: false,
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
export function storeDefine(store: 'dynamodb' | 'postgres'): Record<string, string> {
  return { 'process.env.STORE': JSON.stringify(store) };
}

/** The bundling options for an environment: LAMBDA_BUNDLING, with tracing compiled in or out. */
export function lambdaBundling(config: Pick<EnvironmentConfig, 'tracing'>): BundlingOptions {
  return { ...LAMBDA_BUNDLING, define: { ...tracingDefine(config.tracing), ...storeDefine('dynamodb') } };
}

export interface ServiceFunctionProps {
  readonly spec: FunctionSpec;
  readonly config: EnvironmentConfig;
  /** The function's environment, except NODE_OPTIONS and POWERTOOLS_TRACE_ENABLED which every function gets. */
  readonly environment: Readonly<Record<string, string>>;
}

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

  constructor(scope: Construct, id: string, { spec, config, environment }: ServiceFunctionProps) {
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

    this.function = new NodejsFunction(this, 'Function', {
      entry: path.join(PROJECT_ROOT, spec.entry),
      handler: 'handler',
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: path.join(PROJECT_ROOT, 'package-lock.json'),
      description: spec.description,
      runtime: LAMBDA_RUNTIME,
      architecture: Architecture.ARM_64,
      memorySize: spec.memoryMb,
      timeout: Duration.seconds(functionTimeoutSeconds(spec, config)),
      role: this.role,
      logGroup: this.logGroup,
      tracing: config.tracing ? Tracing.ACTIVE : Tracing.DISABLED,
      reservedConcurrentExecutions: config.concurrency.reserved[spec.id],
      environment: { ...LAMBDA_NODE_OPTIONS, [TRACE_ENABLED_ENV]: String(config.tracing), ...environment },
      bundling: lambdaBundling(config),
    });

    Validations.of(this.function).acknowledge({
      id: 'AwsSolutions-L1',
      reason:
        'nodejs22.x is the runtime this code is built (esbuild target node22) and tested for; moving to a newer ' +
        'runtime is a deliberate upgrade with its own test run, not something a CDK release should do for us.',
    });
    if (config.tracing) {
      Validations.of(this.role).acknowledge({
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason:
          'Active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level ' +
          'permissions, so they can only be granted on "*". The tests pin that no other action gets "*".',
      });
    }
  }
}
