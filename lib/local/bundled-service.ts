import { basename } from 'node:path';
import { bundledEnvironment, type LocalValues } from './bundled-environment';
import { type BundledFunction, type BundledFunctionOptions, startBundledFunction } from './bundled-function';
import type { DeployedStack } from './cloud-assembly';
import { SERVICE_FUNCTIONS, type ServiceFunction, type ServiceHandlers } from './service-functions';
import type { StackSettings } from './stack-settings';

export interface BundledServiceOptions {
  readonly stack: DeployedStack;
  /** The local stand-ins' values: table names, queue URLs, processor and mailer URLs, the secret, endpoints. */
  readonly local: LocalValues;
  /** The run's settings; where they differ from a function's template (a shorter lease for a test), they win. */
  readonly settings: StackSettings;
  readonly output?: BundledFunctionOptions['output'];
}

/** The service's functions running from their bundles. */
export interface BundledService {
  readonly handlers: ServiceHandlers;
  readonly functions: ReadonlyMap<ServiceFunction, BundledFunction>;
  /** One line per function: the bundle it runs, and what of its template's environment was replaced. */
  readonly summary: readonly string[];
  stop(): Promise<void>;
}

/**
 * Starts every function of the service from the bundle the synthesized template deploys, each in execution
 * environments of its own with its own environment (bundled-function.ts), and initialises one environment of each
 * before the stack serves: a bundle that cannot load (a wrong handler export, an import that fails, a missing
 * variable read at cold start) stops the start, naming the function and the error Lambda would report.
 */
export async function startBundledService(options: BundledServiceOptions): Promise<BundledService> {
  const { stack, local, settings } = options;
  // Only values the template sets are replaced (bundledEnvironment never adds one).
  const overrides = {
    IDEMPOTENCY_LEASE_SECONDS: String(settings.leaseSeconds),
    IDEMPOTENCY_TTL_SECONDS: String(settings.ttlSeconds),
    PROCESSOR_TIMEOUT_MS: String(settings.processorTimeoutMs),
  };
  // Every environment first: a template this stack can't run locally is refused before any process starts.
  const plans = (Object.keys(SERVICE_FUNCTIONS) as ServiceFunction[]).map((key) => {
    const deployed = stack.function(SERVICE_FUNCTIONS[key].constructId);
    const environment = bundledEnvironment(deployed, (id) => stack.resourceType(id), local, overrides);
    return { key, deployed, environment, bundle: `${basename(deployed.codeDirectory)} (${deployed.handler})` };
  });
  const summary = plans.map(
    ({ key, deployed, environment, bundle }) =>
      `${deployed.id}: ${bundle}, ${settings.timeoutsMs[key] / 1000} s` +
      `; local stand-ins: ${environment.substituted.join(', ') || 'none'}` +
      (environment.overridden.length > 0 ? `; overridden: ${environment.overridden.join(', ')}` : ''),
  );

  const functions = new Map<ServiceFunction, BundledFunction>();
  const stopAll = () => Promise.all([...functions.values()].map((fn) => fn.stop())).then(() => undefined);
  try {
    for (const { key, deployed, environment } of plans) {
      functions.set(
        key,
        startBundledFunction({
          functionName: SERVICE_FUNCTIONS[key].name,
          codeDirectory: deployed.codeDirectory,
          handler: deployed.handler,
          runtime: deployed.runtime,
          memoryMb: deployed.memoryMb,
          environment: environment.variables,
          output: options.output,
        }),
      );
    }
    const inits = await Promise.allSettled(plans.map(({ key }) => functions.get(key)!.warm()));
    const failures = inits.flatMap((init, index) => {
      const { deployed, bundle } = plans[index]!;
      return init.status === 'rejected' ? [`${deployed.id} from ${bundle}: ${describe(init.reason)}`] : [];
    });
    if (failures.length > 0) {
      throw new Error(`The bundled functions failed to initialise:\n${failures.map((f) => `  - ${f}`).join('\n')}`);
    }
    const handler = (key: ServiceFunction) => functions.get(key)!.handler;
    return {
      handlers: {
        paymentsCreate: handler('paymentsCreate'),
        paymentsGet: handler('paymentsGet'),
        authorizer: handler('authorizer'),
        webhookReceiver: handler('webhookReceiver'),
        settlementConsumer: handler('settlementConsumer'),
        paymentsCompleter: handler('paymentsCompleter'),
      },
      functions,
      summary,
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
