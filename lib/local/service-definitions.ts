import { type FunctionSpec, type FunctionTrigger, serviceFunctions } from '../infra/functions';

/**
 * The service's functions as the CDK stack defines them (lib/infra/functions.ts: plain data, no CDK), looked up the
 * way the local stack needs them: by what invokes them, and by the name it invokes them by.
 */

export type TriggeredBy<K extends FunctionTrigger['kind']> = FunctionSpec & {
  readonly trigger: Extract<FunctionTrigger, { kind: K }>;
};

/** The functions with this kind of trigger, in definition order. */
export function triggeredBy<K extends FunctionTrigger['kind']>(kind: K): TriggeredBy<K>[] {
  return serviceFunctions.filter((spec): spec is TriggeredBy<K> => spec.trigger.kind === kind);
}

/**
 * The one function with this kind of trigger: the local stack runs one authorizer (as the API has one) and one
 * consumer of the settlement queue.
 */
export function onlyTriggeredBy<K extends 'authorizer' | 'settlement-queue'>(kind: K): TriggeredBy<K> {
  const specs = triggeredBy(kind);
  const [spec] = specs;
  if (!spec || specs.length > 1) {
    throw new Error(`the local stack runs exactly one ${kind} function; the definitions have ${specs.length}`);
  }
  return spec;
}

/**
 * The name the local stack invokes a function by (its context's `functionName`, its log lines, its bundle's
 * `AWS_LAMBDA_FUNCTION_NAME`): the construct id in kebab case, `PaymentsCreate` → `payments-create`.
 */
export function localName(spec: Pick<FunctionSpec, 'id'>): string {
  return spec.id.replace(/(?<=[a-z0-9])(?=[A-Z])/g, '-').toLowerCase();
}
