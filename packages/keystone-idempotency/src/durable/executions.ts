import { ExecutionNameTakenError } from './errors.js';

/** A durable execution as the front door reports it. `input` is the payload it was started with (JSON text). */
export type ExecutionState =
  | { readonly status: 'RUNNING'; readonly input: string | undefined }
  | { readonly status: 'SUCCEEDED'; readonly input: string | undefined; readonly result: unknown }
  | {
      readonly status: 'FAILED' | 'TIMED_OUT' | 'STOPPED';
      readonly input: string | undefined;
      /** The error's type as Lambda reports it; its message stays in the execution's history, never in a response. */
      readonly errorType?: string;
    };

export interface StartedExecution {
  readonly executionArn: string;
}

/**
 * The two calls to Lambda the front door and the SQS dispatcher make, behind an interface so that tests (and local
 * stacks) can run executions elsewhere. {@link lambdaDurableExecutions} makes them on Lambda.
 *
 * `start` must be idempotent by name, as Lambda's Invoke is: a name that exists with the same payload answers that
 * execution, one with another payload throws {@link ExecutionNameTakenError}.
 */
export interface DurableExecutions {
  start(request: { readonly name: string; readonly payload: string }): Promise<StartedExecution>;
  describe(executionArn: string): Promise<ExecutionState>;
}

/** The part of a `LambdaClient` this needs: any object with its `send` will do (a client with middleware, a stub). */
export interface LambdaCommandSender {
  // biome-ignore lint/suspicious/noExplicitAny: the commands are built from the SDK loaded on first use
  send(command: any): Promise<any>;
}

export interface LambdaDurableExecutionsOptions {
  readonly client: LambdaCommandSender;
  /**
   * The durable function to start, qualified: a version or an alias (`orders-approval:live`). Lambda starts durable
   * executions of a published version only, so that every replay runs the same code.
   */
  readonly functionName: string;
}

/**
 * {@link DurableExecutions} on Lambda: `start` is an asynchronous Invoke (`InvocationType: 'Event'`) with
 * `DurableExecutionName`, `describe` is `GetDurableExecution`. `@aws-sdk/client-lambda` is loaded on the first call.
 *
 * @example
 * const executions = lambdaDurableExecutions({ client: new LambdaClient({}), functionName: 'approvals:live' });
 */
export function lambdaDurableExecutions(options: LambdaDurableExecutionsOptions): DurableExecutions {
  const { client, functionName } = options;
  return {
    async start({ name, payload }) {
      const { InvokeCommand } = await lambdaCommands();
      let response: { DurableExecutionArn?: string };
      try {
        response = await client.send(
          new InvokeCommand({
            FunctionName: functionName,
            InvocationType: 'Event',
            DurableExecutionName: name,
            Payload: new TextEncoder().encode(payload),
          }),
        );
      } catch (error) {
        if ((error as { name?: unknown }).name === 'DurableExecutionAlreadyStartedException') {
          throw new ExecutionNameTakenError(name, { cause: error });
        }
        throw error;
      }
      if (!response.DurableExecutionArn) {
        throw new Error(`Invoke of ${functionName} answered no DurableExecutionArn: is it a durable function?`);
      }
      return { executionArn: response.DurableExecutionArn };
    },
    async describe(executionArn) {
      const { GetDurableExecutionCommand } = await lambdaCommands();
      const found: { Status?: string; InputPayload?: string; Result?: string; Error?: { ErrorType?: string } } =
        await client.send(new GetDurableExecutionCommand({ DurableExecutionArn: executionArn }));
      switch (found.Status) {
        case 'SUCCEEDED':
          return {
            status: 'SUCCEEDED',
            input: found.InputPayload,
            result: found.Result === undefined ? null : JSON.parse(found.Result),
          };
        case 'FAILED':
        case 'TIMED_OUT':
        case 'STOPPED':
          return {
            status: found.Status,
            input: found.InputPayload,
            ...(found.Error?.ErrorType ? { errorType: found.Error.ErrorType } : {}),
          };
        default:
          return { status: 'RUNNING', input: found.InputPayload };
      }
    },
  };
}

/** The Lambda SDK, loaded on the first call: the entry point loads without it. */
function lambdaCommands() {
  return import('@aws-sdk/client-lambda');
}
