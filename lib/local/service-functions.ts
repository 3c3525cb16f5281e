import { join } from 'node:path';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { type FunctionSpec, serviceFunctions } from '../infra/functions';
import type { Route, TokenAuthorizerConfig } from './api-gateway';
import type { HttpApiRoute, RequestAuthorizerConfig } from './http-api';
import type { LambdaHandler } from './lambda-invoke';
import type { LocalLog } from './log';
import { type Schedule, startSchedule } from './schedule';
import { localName, onlyTriggeredBy, triggeredBy } from './service-definitions';
import { startSourceFunctions } from './source-functions';
import type { QueueWithDlq } from './sqs';
import { type SqsPoller, startSqsPoller } from './sqs-poller';
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

/**
 * Every function from its TypeScript source (its definition's `entry`), in a runtime of the stack's own whose
 * `process.env` is `environment`: the functions read their configuration there at import, and nothing is written
 * to this process's environment (source-functions.ts).
 */
export function startSourceService(
  environment: Readonly<Record<string, string | undefined>>,
  log: LocalLog,
): Promise<RunningFunctions> {
  return startSourceFunctions({
    functions: serviceFunctions.map((spec) => ({ name: spec.id, entry: join(ROOT, spec.entry) })),
    environment,
    tsconfig: join(ROOT, 'tsconfig.json'),
    log,
  });
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
