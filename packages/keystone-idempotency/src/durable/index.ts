/**
 * Lambda durable functions (`@aws/durable-execution-sdk-js`), made idempotent at both ends: an HTTP front door and
 * an SQS dispatcher that start one execution per key, and a step whose outside effect and local writes happen once
 * although the SDK runs a step at least once.
 */
export { DuplicateStepNameError, ExecutionNameTakenError, StepInFlightError } from './errors.js';
export { EXECUTION_NAME_PATTERN, executionName } from './execution-name.js';
export {
  type DurableExecutions,
  type ExecutionState,
  type LambdaCommandSender,
  type LambdaDurableExecutionsOptions,
  lambdaDurableExecutions,
  type StartedExecution,
} from './executions.js';
export {
  type DurableExecutionStatusOptions,
  type DurableFrontDoorOptions,
  DurableProblemType,
  type DurableRequest,
  durableExecutionStatus,
  durableFrontDoor,
  executionId,
} from './front-door.js';
export { type DispatchedRecord, makeSqsDurableDispatcher, type SqsDurableDispatcherOptions } from './sqs-dispatcher.js';
export { type DurableStepHandle, type IdempotentStepOptions, idempotentStep } from './step.js';
