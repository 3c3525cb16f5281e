import { basename } from 'node:path';
import {
  type BundledFunction,
  type BundledFunctionOptions,
  startBundledFunction,
} from '@keystone-idempotency/local-aws/bundled-function';
import { serviceFunctions } from '../infra/functions';
import { bundledEnvironment, type LocalValues } from './bundled-environment';
import type { DeployedStack } from './cloud-assembly';
import { localName } from './service-definitions';
import { functionConcurrency, type RunningFunctions } from './service-functions';
import type { StackSettings } from './stack-settings';

export interface BundledServiceOptions {
  readonly stack: DeployedStack;
  /** The local stand-ins' values: table names, queue URLs, processor and mailer URLs, the secret, endpoints. */
  readonly local: LocalValues;
  /** The run's settings; where they differ from a function's template (a shorter lease for a test), they win. */
  readonly settings: StackSettings;
  /** Template values to replace for this run besides the timing settings (the PostgreSQL schema of a test's own). */
  readonly overrides?: Readonly<Record<string, string>>;
  readonly output?: BundledFunctionOptions['output'];
}

/** The service's functions running from their bundles. */
export interface BundledService extends RunningFunctions {
  /** By construct id. */
  readonly functions: ReadonlyMap<string, BundledFunction>;
  /** One line per function: the bundle it runs, and what of its template's environment was replaced. */
  readonly summary: readonly string[];
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
    WAREHOUSE_TIMEOUT_MS: String(settings.warehouseTimeoutMs),
    MAILER_TIMEOUT_MS: String(settings.mailerTimeoutMs),
    ...options.overrides,
  };
  // Every environment first: a template this stack can't run locally is refused before any process starts.
  const plans = serviceFunctions.map((spec) => {
    const deployed = stack.function(spec.id);
    const environment = bundledEnvironment(deployed, (id) => stack.resourceType(id), local, overrides);
    return { spec, deployed, environment, bundle: `${basename(deployed.codeDirectory)} (${deployed.handler})` };
  });
  const summary = plans.map(
    ({ spec, deployed, environment, bundle }) =>
      `${deployed.id}: ${bundle}, ${(settings.timeoutsMs[spec.id] ?? 0) / 1000} s` +
      `; local stand-ins: ${environment.substituted.join(', ') || 'none'}` +
      (environment.overridden.length > 0 ? `; overridden: ${environment.overridden.join(', ')}` : ''),
  );

  const functions = new Map<string, BundledFunction>();
  const stopAll = () => Promise.all([...functions.values()].map((fn) => fn.stop())).then(() => undefined);
  try {
    for (const { spec, deployed, environment } of plans) {
      functions.set(
        spec.id,
        startBundledFunction({
          functionName: localName(spec),
          codeDirectory: deployed.codeDirectory,
          handler: deployed.handler,
          runtime: deployed.runtime,
          memoryMb: deployed.memoryMb,
          environment: environment.variables,
          ...functionConcurrency(settings.concurrency, spec.id),
          output: options.output,
        }),
      );
    }
    const inits = await Promise.allSettled(plans.map(({ spec }) => functions.get(spec.id)!.warm()));
    const failures = inits.flatMap((init, index) => {
      const { deployed, bundle } = plans[index]!;
      return init.status === 'rejected' ? [`${deployed.id} from ${bundle}: ${describe(init.reason)}`] : [];
    });
    if (failures.length > 0) {
      throw new Error(`The bundled functions failed to initialise:\n${failures.map((f) => `  - ${f}`).join('\n')}`);
    }
    return {
      handlers: new Map([...functions].map(([id, fn]) => [id, fn.handler])),
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
