import { join } from 'node:path';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Route, TokenAuthorizerConfig } from '@keystone-idempotency/local-aws/api-gateway';
import type { HttpApiRoute, RequestAuthorizerConfig } from '@keystone-idempotency/local-aws/http-api';
import type { LambdaHandler } from '@keystone-idempotency/local-aws/lambda-invoke';
import type { LocalLog } from '@keystone-idempotency/local-aws/log';
import { type Schedule, startSchedule } from '@keystone-idempotency/local-aws/schedule';
import {
  bundleSources,
  type SourceBundle,
  startSourceFunctions,
} from '@keystone-idempotency/local-aws/source-functions';
import type { QueueWithDlq } from '@keystone-idempotency/local-aws/sqs';
import { type SqsPoller, startSqsPoller } from '@keystone-idempotency/local-aws/sqs-poller';
import { type FunctionSpec, serviceFunctions } from '../infra/functions';
import { BUNDLE_CONDITIONS } from '../infra/library-source';
import { storeKind } from '../payments/config';
import { localName, onlyTriggeredBy, triggeredBy } from './service-definitions';
import type { StackSettings } from './stack-settings';

/**
 * The payments service on the local emulators, derived from the definitions the CDK stack deploys
 * (`serviceFunctions`, lib/infra/functions.ts): each function's code (its `entry`, or its bundle), and what invokes
 * it (`trigger`): a route of the REST API and of the HTTP API, behind their authorizer or not; the settlement
 * queue, through a poller that stands in for the event source mapping; the schedule, through a timer that stands
 * in for the EventBridge rule. Adding a function is adding its definition: nothing here names one.
 */

/** The repository root: definitions' entries are relative to it. */
const ROOT = join(__dirname, '..', '..');

/** How the emulators invoke each function, by its construct id: from its source, or from its bundle. */
// biome-ignore lint/suspicious/noExplicitAny: the event and result are whatever its trigger sends and takes
export type ServiceHandlers = ReadonlyMap<string, LambdaHandler<any, any>>;

export interface RunningFunctions {
  readonly handlers: ServiceHandlers;
  stop(): Promise<void>;
}

/** The bundle-time constants of the deployment (lib/infra/service-function.ts), for this run's store and tracing. */
function sourceDefines(settings: Readonly<Record<string, string | undefined>>): Record<string, string> {
  return {
    'process.env.STORE': JSON.stringify(storeKind(settings)),
    'process.env.POWERTOOLS_TRACE_ENABLED': JSON.stringify(
      settings.POWERTOOLS_TRACE_ENABLED === 'true' ? 'true' : 'false',
    ),
  };
}

/**
 * Bundles every function's TypeScript source (its definition's `entry`) as the deployment bundles it, for the store
 * and tracing `settings` ask for (source-functions.ts). Started on its own, so the stack bundles while its database
 * starts; `startSourceService` runs the result.
 */
export function bundleServiceSources(settings: Readonly<Record<string, string | undefined>>): Promise<SourceBundle> {
  return bundleSources({
    functions: serviceFunctions.map((spec) => ({ name: localName(spec), entry: join(ROOT, spec.entry) })),
    tsconfig: join(ROOT, 'tsconfig.json'),
    define: sourceDefines(settings),
    // The library by name, to its sources, as the deployment's bundling resolves it (LAMBDA_BUNDLING's esbuildArgs).
    conditions: [...BUNDLE_CONDITIONS],
  });
}

/**
 * Every function from its TypeScript source, bundled as deployed and run on the deployed bundles' machinery
 * (source-functions.ts, bundled-function.ts): each invocation in an execution environment of its own at a time (a
 * process, reused while healthy), killed at the function's timeout as Lambda ends a timed-out environment, so an
 * invocation stalled on the database gives its connections and locks back when it times out. Each environment's
 * `process.env` is what `FUNCTION_SETTINGS` picks of `settings`, under the variables the Lambda service sets for
 * that function (its own `AWS_LAMBDA_FUNCTION_NAME`, region, harmless credentials): the functions read their
 * configuration there at import, nothing is written to this process's environment, and no function shares modules,
 * clients or a connection pool with another, nor one invocation with another.
 */
export async function startSourceService(
  settings: Readonly<Record<string, string | undefined>>,
  concurrency: StackSettings['concurrency'],
  bundle: Promise<SourceBundle> = bundleServiceSources(settings),
): Promise<RunningFunctions> {
  const byName = new Map(serviceFunctions.map((spec) => [localName(spec), spec.id]));
  const functions = await startSourceFunctions({
    functions: serviceFunctions.map((spec) => ({
      name: localName(spec),
      entry: join(ROOT, spec.entry),
      memoryMb: spec.memoryMb,
      ...functionConcurrency(concurrency, spec.id),
    })),
    environment: functionSettings(settings),
    bundle,
    // As the functions' lines always came out: the Powertools JSON they log, as CloudWatch would store it.
    output: (line, stream) => (stream === 'stderr' ? process.stderr : process.stdout).write(`${line}\n`),
  });
  return {
    handlers: new Map([...functions.handlers].map(([name, handler]) => [byName.get(name)!, handler])),
    stop: () => functions.stop(),
  };
}

/** A function's concurrency: its reservation, or what the account allows every function without one. */
export function functionConcurrency(
  concurrency: StackSettings['concurrency'],
  id: string,
): { readonly concurrency: number; readonly reserved: boolean } {
  const reserved = concurrency.reserved[id];
  return reserved === undefined
    ? { concurrency: concurrency.unreserved, reserved: false }
    : { concurrency: reserved, reserved: true };
}

/**
 * The settings a function run from source is given: the variables of the README's "Local settings" that the
 * functions read (their families by prefix, so a new `DATABASE_...` setting reaches them without an edit here),
 * as a deployed function gets only what its template sets. Nothing else of the shell's environment reaches a
 * function: not the off switch a developer exported for unit tests (`KEYSTONE_IDEMPOTENCY_DISABLED`), not their AWS
 * profile or credentials, not `NODE_OPTIONS`.
 */
export const FUNCTION_SETTINGS = {
  prefixes: [
    'DATABASE_',
    'IDEMPOTENCY_',
    'PAYMENTS_',
    'PROCESSOR_',
    'MAILER_',
    'WAREHOUSE_',
    'SETTLEMENT_',
    'POWERTOOLS_',
  ],
  names: ['STORE', 'DYNAMODB_ENDPOINT', 'SQS_ENDPOINT', 'LOG_LEVEL'],
} as const;

export function functionSettings(
  settings: Readonly<Record<string, string | undefined>>,
): Record<string, string | undefined> {
  const given = (name: string) =>
    (FUNCTION_SETTINGS.names as readonly string[]).includes(name) ||
    FUNCTION_SETTINGS.prefixes.some((prefix) => name.startsWith(prefix));
  return Object.fromEntries(Object.entries(settings).filter(([name]) => given(name)));
}

/** The API's routes: one per route function, behind the TOKEN authorizer where its definition asks for it. */
export function serviceRoutes(handlers: ServiceHandlers, settings: StackSettings): Route[] {
  const authorizer: TokenAuthorizerConfig = {
    ...invoked(handlers, settings, onlyTriggeredBy('authorizer')),
    resultTtlSeconds: settings.authorizerResultTtlSeconds,
  };
  return triggeredBy('route').map(
    (spec): Route => ({
      method: spec.trigger.method,
      resource: spec.trigger.path,
      ...invoked(handlers, settings, spec),
      ...(spec.trigger.authorization.kind === 'token' ? { authorizer } : {}),
    }),
  );
}

/**
 * The same routes on the HTTP API (payload 2.0), as lib/infra/http-api.ts deploys them: the same functions, the
 * authorizer function as a REQUEST authorizer with simple responses on the Authorization header, cached as long as
 * the REST API's.
 */
export function serviceHttpApiRoutes(handlers: ServiceHandlers, settings: StackSettings): HttpApiRoute[] {
  const authorizer: RequestAuthorizerConfig = {
    ...invoked(handlers, settings, onlyTriggeredBy('authorizer')),
    identitySource: ['$request.header.Authorization'],
    resultTtlSeconds: settings.authorizerResultTtlSeconds,
  };
  return triggeredBy('route').map(
    (spec): HttpApiRoute => ({
      method: spec.trigger.method,
      path: spec.trigger.path,
      ...invoked(handlers, settings, spec),
      ...(spec.trigger.authorization.kind === 'token' ? { authorizer } : {}),
    }),
  );
}

/**
 * The Lambda timeout of routes the definitions don't have (the demo page's, the OpenAPI document): the longest of
 * the API functions', which the integration timeout cuts short anyway.
 */
export function localRouteTimeoutMs(settings: StackSettings): number {
  return Math.max(...triggeredBy('route').map((spec) => settings.timeoutsMs[spec.id] ?? 0));
}

export interface QueueConsumerOptions {
  readonly handlers: ServiceHandlers;
  readonly settings: StackSettings;
  readonly client: SQSClient;
  readonly queue: QueueWithDlq;
  readonly log: LocalLog;
}

/** The settlement queue's consumer, fed by a poller as Lambda's SQS event source mapping feeds it. */
export async function startSettlementConsumer(options: QueueConsumerOptions): Promise<SqsPoller> {
  const { handlers, settings, client, queue, log } = options;
  const { handler, functionName, timeoutMs } = invoked(handlers, settings, onlyTriggeredBy('settlement-queue'));
  return startSqsPoller({
    client,
    queueUrl: queue.queueUrl,
    queueArn: queue.queueArn,
    handler,
    functionName,
    functionTimeoutMs: timeoutMs,
    batchSize: settings.settlement.batchSize,
    concurrency: settings.settlement.concurrency,
    log,
  });
}

/**
 * The scheduled functions (the completer), each run by a timer that stands in for its EventBridge rule, at the
 * stack's period (COMPLETER_INTERVAL_SECONDS locally, the environment's recovery period deployed).
 */
export function startSchedules(handlers: ServiceHandlers, settings: StackSettings, log: LocalLog): Schedule[] {
  return triggeredBy('schedule').map((spec) => {
    const { handler, functionName, timeoutMs } = invoked(handlers, settings, spec);
    return startSchedule({ handler, functionName, timeoutMs, periodMs: settings.completerIntervalSeconds * 1000, log });
  });
}

/** What an emulator needs to invoke a function: its handler, its name and its timeout. */
function invoked(handlers: ServiceHandlers, settings: StackSettings, spec: FunctionSpec) {
  const handler = handlers.get(spec.id);
  const timeoutMs = settings.timeoutsMs[spec.id];
  if (!handler || timeoutMs === undefined) throw new Error(`the local stack has no function ${spec.id}`);
  return { handler, functionName: localName(spec), timeoutMs };
}
