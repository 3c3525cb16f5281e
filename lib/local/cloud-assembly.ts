import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { AssetManifestArtifact, CloudAssembly, type CloudFormationStackArtifact } from 'aws-cdk-lib/cx-api';
import type { DatabaseRole, SqlAccess } from '../tables/postgres-access';

/**
 * A value in a template: a literal, or an intrinsic function (`{ "Ref": "..." }`, `{ "Fn::GetAtt": [...] }`) whose
 * value only exists once the stack is deployed.
 */
export type TemplateValue = string | number | boolean | { readonly [key: string]: unknown } | readonly unknown[];

/** A Lambda function as the synthesized template deploys it. */
export interface DeployedFunction {
  /** Its construct id (`PaymentsCreate`), from the `aws:cdk:path` the template records. */
  readonly id: string;
  readonly logicalId: string;
  /** The directory that CDK zips and uploads as its code: the asset the template's `Code.S3Key` names. */
  readonly codeDirectory: string;
  /** `index.handler`. */
  readonly handler: string;
  readonly runtime: string;
  readonly timeoutSeconds: number;
  readonly memoryMb: number;
  /** `ReservedConcurrentExecutions`: its concurrency limit, when the template reserves one. */
  readonly reservedConcurrency?: number;
  /** `Environment.Variables`, as written in the template. */
  readonly environment: Readonly<Record<string, TemplateValue>>;
}

/** An SQS event source mapping of a function, with the queue it reads. */
export interface DeployedQueueSource {
  readonly batchSize: number;
  readonly maximumConcurrency?: number;
  readonly reportBatchItemFailures: boolean;
  readonly visibilityTimeoutSeconds: number;
  /** The queue's redrive policy; absent without a DLQ. */
  readonly maxReceiveCount?: number;
}

/** A gateway response of the REST API, as the template maps it. */
export interface DeployedGatewayResponse {
  readonly statusCode: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly template: string;
}

interface CfnResource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
  readonly Metadata?: Record<string, unknown>;
}

/** What the stack's database migration (a custom resource run at deploy) applies: the schema and each role. */
export interface DeployedMigration {
  readonly schema: string;
  /** As the template has them: provisionRoles refuses a table or privilege it does not know. */
  readonly roles: readonly DatabaseRole[];
}

/** The custom resource type of the database migration (lib/infra/database.ts). */
const MIGRATION_RESOURCE_TYPE = 'Custom::DatabaseMigration';

/** CloudFormation's and Lambda's defaults for properties a template leaves out. */
const DEFAULTS = { timeoutSeconds: 3, memoryMb: 128, visibilityTimeoutSeconds: 30, batchSize: 10 } as const;

/**
 * One stack of a cloud assembly (the `cdk.out` directory `cdk synth` writes): its template, and for each Lambda
 * function the asset directory that is its deployed code. Read with the CDK's own cloud assembly reader, which also
 * refuses an assembly written by an incompatible CDK version.
 *
 * @example
 * const stack = DeployedStack.load('cdk.out'); // the one stack with functions, or name it
 * stack.function('PaymentsCreate').codeDirectory; // cdk.out/asset.9a3c…
 */
export class DeployedStack {
  readonly stackName: string;
  readonly functions: ReadonlyMap<string, DeployedFunction>;
  private readonly resources: Readonly<Record<string, CfnResource>>;

  private constructor(artifact: CloudFormationStackArtifact) {
    this.stackName = artifact.stackName;
    this.resources = (artifact.template as { Resources?: Record<string, CfnResource> }).Resources ?? {};
    const assets = assetDirectories(artifact);
    const functions = new Map<string, DeployedFunction>();
    for (const [logicalId, resource] of Object.entries(this.resources)) {
      if (resource.Type !== 'AWS::Lambda::Function') continue;
      const fn = deployedFunction(logicalId, resource, assets, this.stackName);
      if (functions.has(fn.id)) throw new Error(`${this.stackName} has two functions with the construct id ${fn.id}`);
      functions.set(fn.id, fn);
    }
    this.functions = functions;
  }

  /**
   * Reads the stack `stackName` from the cloud assembly in `directory`, or, without a name, the one stack in it that
   * has Lambda functions (`cdk synth -c env=dev` writes one; a plain `cdk synth` writes one per environment).
   */
  static load(directory: string, stackName?: string): DeployedStack {
    if (!existsSync(join(directory, 'manifest.json'))) {
      throw new Error(`${directory} is not a cloud assembly (no manifest.json): run \`npm run synth -- -c env=dev\``);
    }
    const stacks = new CloudAssembly(directory).stacks;
    if (stackName) {
      const artifact = stacks.find((stack) => stack.stackName === stackName);
      if (!artifact) {
        throw new Error(`${directory} has no stack ${stackName}; it has ${stacks.map((s) => s.stackName).join(', ')}`);
      }
      return new DeployedStack(artifact);
    }
    const withFunctions = stacks.filter((stack) => hasFunctions(stack.template));
    if (withFunctions.length !== 1) {
      const names = withFunctions.map((stack) => stack.stackName).join(', ') || 'none';
      throw new Error(`${directory} has ${withFunctions.length} stacks with functions (${names}): name the one to run`);
    }
    return new DeployedStack(withFunctions[0]!);
  }

  /** The function with this construct id; fails naming the ones there are. */
  function(id: string): DeployedFunction {
    const fn = this.functions.get(id);
    if (!fn)
      throw new Error(`${this.stackName} has no function ${id}; it has ${[...this.functions.keys()].join(', ')}`);
    return fn;
  }

  /** The type of the resource a `Ref` or `Fn::GetAtt` names (`AWS::DynamoDB::Table`), if it is in this template. */
  resourceType(logicalId: string): string | undefined {
    return this.resources[logicalId]?.Type;
  }

  /** The integration timeout of the API Gateway methods that invoke the function (the smallest, if several). */
  integrationTimeoutMs(fn: DeployedFunction): number | undefined {
    const timeouts = this.resourcesOfType('AWS::ApiGateway::Method')
      .map((method) => method.Properties?.Integration as { Uri?: unknown; TimeoutInMillis?: number } | undefined)
      .filter((integration) => integration && mentions(integration.Uri, fn.logicalId))
      .map((integration) => integration?.TimeoutInMillis ?? 29_000);
    return timeouts.length > 0 ? Math.min(...timeouts) : undefined;
  }

  /** How long API Gateway caches the answers of the TOKEN authorizer backed by the function (300 s unless set). */
  authorizerResultTtlSeconds(fn: DeployedFunction): number | undefined {
    const authorizer = this.resourcesOfType('AWS::ApiGateway::Authorizer').find((resource) =>
      mentions(resource.Properties?.AuthorizerUri, fn.logicalId),
    );
    if (!authorizer) return undefined;
    return (authorizer.Properties?.AuthorizerResultTtlInSeconds as number | undefined) ?? 300;
  }

  /**
   * The REST API's gateway response of this type (`INTEGRATION_FAILURE`), if the template maps it: its status, its
   * header values unquoted, and its `application/json` template.
   */
  gatewayResponse(type: string): DeployedGatewayResponse | undefined {
    const found = this.resourcesOfType('AWS::ApiGateway::GatewayResponse').find(
      (resource) => resource.Properties?.ResponseType === type,
    )?.Properties;
    if (!found) return undefined;
    const parameters = (found.ResponseParameters as Record<string, string> | undefined) ?? {};
    const headers = Object.fromEntries(
      Object.entries(parameters).flatMap(([name, value]) => {
        const header = /^gatewayresponse\.header\.(.+)$/.exec(name)?.[1];
        const literal = /^'(.*)'$/.exec(value)?.[1];
        return header && literal !== undefined ? [[header, literal]] : [];
      }),
    );
    const templates = (found.ResponseTemplates as Record<string, string> | undefined) ?? {};
    return {
      statusCode: Number(found.StatusCode ?? 500),
      headers,
      template: templates['application/json'] ?? '{"message":$context.error.messageString}',
    };
  }

  /** The SQS event source mapping that feeds the function, and the settings of its queue. */
  queueSource(fn: DeployedFunction): DeployedQueueSource | undefined {
    const mapping = this.resourcesOfType('AWS::Lambda::EventSourceMapping').find((resource) =>
      mentions(resource.Properties?.FunctionName, fn.logicalId),
    )?.Properties;
    if (!mapping) return undefined;
    const queueId = referencedLogicalId(mapping.EventSourceArn);
    const queue = queueId ? this.resources[queueId] : undefined;
    if (queue?.Type !== 'AWS::SQS::Queue') {
      throw new Error(`${fn.id}'s event source is not an SQS queue of ${this.stackName}`);
    }
    const redrive = queue.Properties?.RedrivePolicy as { maxReceiveCount?: number } | undefined;
    const scaling = mapping.ScalingConfig as { MaximumConcurrency?: number } | undefined;
    return {
      batchSize: (mapping.BatchSize as number | undefined) ?? DEFAULTS.batchSize,
      maximumConcurrency: scaling?.MaximumConcurrency,
      reportBatchItemFailures: ((mapping.FunctionResponseTypes as string[] | undefined) ?? []).includes(
        'ReportBatchItemFailures',
      ),
      visibilityTimeoutSeconds:
        (queue.Properties?.VisibilityTimeout as number | undefined) ?? DEFAULTS.visibilityTimeoutSeconds,
      maxReceiveCount: redrive?.maxReceiveCount,
    };
  }

  /** The period of the EventBridge schedule that targets the function, in seconds (`rate(...)` expressions only). */
  schedulePeriodSeconds(fn: DeployedFunction): number | undefined {
    const rule = this.resourcesOfType('AWS::Events::Rule').find((resource) =>
      mentions(resource.Properties?.Targets, fn.logicalId),
    );
    const expression = rule?.Properties?.ScheduleExpression;
    if (typeof expression !== 'string') return undefined;
    const rate = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression);
    if (!rate) throw new Error(`${fn.id}'s schedule ${expression} is not a rate(...) the local stack can run`);
    const unitSeconds = { minute: 60, hour: 3600, day: 86_400 }[rate[2]!.replace(/s$/, '') as 'minute'];
    return Number(rate[1]) * unitSeconds;
  }

  /**
   * Where the functions keep their data: the STORE their templates set (`postgres`), or DynamoDB, the default, where
   * none sets one. (Functions that touch no data, the migration's and CDK's own, set none.)
   */
  store(): 'dynamodb' | 'postgres' {
    const stores = new Set(
      [...this.functions.values()].flatMap((fn) => (fn.environment.STORE === undefined ? [] : [fn.environment.STORE])),
    );
    const [store = 'dynamodb', ...others] = stores;
    if (others.length > 0)
      throw new Error(`${this.stackName}'s functions disagree on STORE: ${[...stores].join(', ')}`);
    if (store !== 'dynamodb' && store !== 'postgres')
      throw new Error(`${this.stackName} has an unknown STORE ${store}`);
    return store;
  }

  /** The database migration's schema and roles, as the template hands them to the migration function. */
  databaseMigration(): DeployedMigration | undefined {
    const [migration, ...others] = this.resourcesOfType(MIGRATION_RESOURCE_TYPE);
    if (!migration) return undefined;
    if (others.length > 0) throw new Error(`${this.stackName} has more than one ${MIGRATION_RESOURCE_TYPE}`);
    const properties = migration.Properties as {
      Schema: string;
      Roles: { Name: string; Grants: { Table: string; Privileges: string[] }[] }[];
    };
    return {
      schema: properties.Schema,
      roles: properties.Roles.map((role) => ({
        name: role.Name,
        grants: role.Grants.map((grant) => ({ table: grant.Table, privileges: grant.Privileges }) as SqlAccess),
      })),
    };
  }

  private resourcesOfType(type: string): CfnResource[] {
    return Object.values(this.resources).filter((resource) => resource.Type === type);
  }
}

/** The logical id a `{ "Ref": id }` or `{ "Fn::GetAtt": [id, attribute] }` names, if the value is one. */
export function referencedLogicalId(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const ref = (value as { Ref?: unknown }).Ref;
  if (typeof ref === 'string') return ref;
  const getAtt = (value as { 'Fn::GetAtt'?: unknown })['Fn::GetAtt'];
  if (Array.isArray(getAtt) && typeof getAtt[0] === 'string') return getAtt[0];
  return undefined;
}

/** Whether a template value (an ARN built with `Fn::Join`, a target list...) refers to the resource anywhere. */
function mentions(value: unknown, logicalId: string): boolean {
  if (referencedLogicalId(value) === logicalId) return true;
  if (Array.isArray(value)) return value.some((item) => mentions(item, logicalId));
  if (typeof value === 'object' && value !== null)
    return Object.values(value).some((item) => mentions(item, logicalId));
  return false;
}

function hasFunctions(template: unknown): boolean {
  const resources = (template as { Resources?: Record<string, CfnResource> }).Resources ?? {};
  return Object.values(resources).some((resource) => resource.Type === 'AWS::Lambda::Function');
}

/** S3 object key → the asset directory CDK zips into it, from the stack's asset manifest. */
function assetDirectories(artifact: CloudFormationStackArtifact): Map<string, string> {
  const directories = new Map<string, string>();
  for (const manifest of artifact.dependencies.filter(AssetManifestArtifact.isAssetManifestArtifact)) {
    for (const asset of Object.values(manifest.contents.files ?? {})) {
      for (const destination of Object.values(asset.destinations)) {
        directories.set(destination.objectKey, join(artifact.assembly.directory, asset.source.path ?? ''));
      }
    }
  }
  return directories;
}

function deployedFunction(
  logicalId: string,
  resource: CfnResource,
  assets: ReadonlyMap<string, string>,
  stackName: string,
): DeployedFunction {
  const properties = resource.Properties ?? {};
  const path = resource.Metadata?.['aws:cdk:path'];
  // `Stack/Construct/Function/Resource`: the construct's id is the segment after the stack's.
  const id = typeof path === 'string' ? path.split('/')[1] : undefined;
  if (!id) {
    throw new Error(`${stackName}'s function ${logicalId} has no aws:cdk:path metadata: synthesize with path metadata`);
  }
  const code = properties.Code as { S3Key?: unknown; ZipFile?: unknown } | undefined;
  const codeDirectory = typeof code?.S3Key === 'string' ? assets.get(code.S3Key) : undefined;
  if (!codeDirectory || !existsSync(codeDirectory) || !statSync(codeDirectory).isDirectory()) {
    throw new Error(`${id}'s code is not a bundled asset directory of the assembly (Code: ${JSON.stringify(code)})`);
  }
  const handler = properties.Handler;
  if (typeof handler !== 'string') throw new Error(`${id} has no Handler`);
  const runtime = properties.Runtime;
  if (typeof runtime !== 'string' || !runtime.startsWith('nodejs')) {
    throw new Error(`${id}'s runtime ${String(runtime)} is not a Node.js runtime`);
  }
  const environment = (properties.Environment as { Variables?: Record<string, TemplateValue> } | undefined)?.Variables;
  return {
    id,
    logicalId,
    codeDirectory,
    handler,
    runtime,
    timeoutSeconds: (properties.Timeout as number | undefined) ?? DEFAULTS.timeoutSeconds,
    memoryMb: (properties.MemorySize as number | undefined) ?? DEFAULTS.memoryMb,
    reservedConcurrency: properties.ReservedConcurrentExecutions as number | undefined,
    environment: environment ?? {},
  };
}
