import type { DurableContext, DurableLoggingContext } from '@aws/durable-execution-sdk-js';
import { IdempotencyError } from '../engine/errors.js';

/**
 * The SDK's durable context as `@aws/durable-execution-sdk-js` 2.x builds it: besides its public members, the source
 * of the log data its logger writes (`getDurableLoggingContext`), which names the operation running now.
 */
interface LoggingDurableContext extends DurableContext {
  getDurableLoggingContext(): DurableLoggingContext;
}

/**
 * The SDK gave no id for the running step: a context that is not the SDK's (a wrapper, a stand-in) or an SDK that
 * no longer reports one. Nothing was claimed and the step's work did not run; retrying would find the same.
 *
 * @internal thrown by idempotentStep; not exported by the package
 */
export class StepIdentityError extends IdempotencyError {
  constructor(message: string) {
    super(message);
    this.name = 'StepIdentityError';
  }
}

/** Whether `context` can name its running step: checked when a step is declared, before anything runs. */
export function assertStepIdentity(context: DurableContext): asserts context is LoggingDurableContext {
  if (typeof (context as Partial<LoggingDurableContext>).getDurableLoggingContext !== 'function') {
    throw new StepIdentityError(
      "idempotentStep needs the durable context the SDK hands the function (@aws/durable-execution-sdk-js 2.x): this one can't name its steps",
    );
  }
}

/**
 * The SDK's id of the step running now (`Operation.Id` in the execution's history): a hash of its place in the
 * execution's tree of contexts, which the SDK numbers per context (`2-1-1`: the first operation of the first item of
 * the map that is the execution's second operation). It is the same on every replay and retry of that step, and
 * different for every other step of the execution, whatever their names. Read from the SDK's log data, which it keeps
 * per running operation (AsyncLocalStorage): call it first thing inside the step's function.
 */
export function runningStepId(context: LoggingDurableContext, name: string): string {
  const running = context.getDurableLoggingContext().getDurableLogData();
  if (typeof running.operationId !== 'string' || running.operationId.length === 0 || running.operationName !== name) {
    throw new StepIdentityError(
      `idempotentStep ${JSON.stringify(name)}: the SDK did not name the running step (found ${JSON.stringify(running.operationName ?? null)}); nothing ran`,
    );
  }
  return running.operationId;
}
