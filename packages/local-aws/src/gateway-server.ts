import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type InvocationOutcome, invokeLambda, type LambdaHandler } from './lambda-invoke';
import type { LocalLog } from './log';

/**
 * What the local REST API and the local HTTP API share: a server on 127.0.0.1 that keeps track of the requests it
 * answers and the handlers still running (also after a gateway has given up on them), and the Lambda integration
 * step with its two clocks, the function's timeout and the gateway's integration timeout. What differs between the
 * two (their events, authorizers and answers) lives in each one's own files.
 */

/** A running local gateway. */
export interface RunningGateway {
  /** `http://127.0.0.1:<port>`, without a stage prefix (routes are served at their paths). */
  readonly url: string;
  readonly port: number;
  /** Stops accepting requests, then waits for running handlers, each at most until its Lambda timeout. */
  close(): Promise<void>;
}

export class GatewayServer {
  /** Requests being answered and handlers still running (also after an integration timeout), for close(). */
  private readonly running = new Set<Promise<void>>();
  private readonly server: Server;
  private listeningPort = 0;

  /**
   * @param handle answers one request.
   * @param failUnexpectedly answers a request whose `handle` threw: a bug in the emulator itself.
   */
  constructor(
    handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
    failUnexpectedly: (res: ServerResponse, error: unknown) => void,
  ) {
    this.server = createServer((req, res) => {
      this.track(handle(req, res).catch((error: unknown) => failUnexpectedly(res, error)));
    });
  }

  get port(): number {
    return this.listeningPort;
  }

  listen(port: number): Promise<RunningGateway> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => {
        this.server.off('error', reject);
        this.listeningPort = (this.server.address() as AddressInfo).port;
        const url = `http://127.0.0.1:${this.listeningPort}`;
        resolve({ url, port: this.listeningPort, close: () => this.close() });
      });
    });
  }

  /** Keeps `finished` in the set close() waits for, until it settles. */
  track(finished: Promise<void>): void {
    this.running.add(finished);
    void finished.then(() => this.running.delete(finished));
  }

  private async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    await Promise.all([...this.running]);
    this.server.closeAllConnections();
    await closed;
  }
}

/** The function behind a route, and the clocks the gateway runs it under. */
export interface IntegrationTarget<TEvent, TResult> {
  readonly handler: LambdaHandler<TEvent, TResult>;
  readonly functionName: string;
  /** The function's own timeout. */
  readonly timeoutMs: number;
  /** How long the gateway waits for it. */
  readonly integrationTimeoutMs: number;
}

/** How the integration ended, as the gateway sees it: the invocation's outcome, or the gateway gave up first. */
export type IntegrationOutcome<TResult> =
  | InvocationOutcome<TResult>
  | { readonly kind: 'integration-timed-out'; readonly integrationTimeoutMs: number };

/**
 * Invokes the route's function and waits for it at most the integration timeout. Past it the handler keeps running
 * (as the Lambda invocation does on AWS) and the gateway answers without it; the server waits for it on close.
 * Failures are logged here, with the request's ids, never sent to the client: each gateway answers them its own way.
 */
export async function integrate<TEvent, TResult>(
  target: IntegrationTarget<TEvent, TResult>,
  event: TEvent,
  scope: { readonly requestId: string; readonly server: GatewayServer; readonly log: LocalLog },
): Promise<{ outcome: IntegrationOutcome<TResult>; logDetails: Record<string, unknown> }> {
  const invocation = invokeLambda(target.handler, event, {
    functionName: target.functionName,
    timeoutMs: target.timeoutMs,
  });
  scope.server.track(invocation.finished);
  const ended = await withTimeout(invocation.outcome, target.integrationTimeoutMs);
  const logDetails = {
    functionName: target.functionName,
    requestId: scope.requestId,
    awsRequestId: invocation.context.awsRequestId,
  };
  if (ended === 'timed-out') {
    scope.log.error(
      `integration timed out after ${target.integrationTimeoutMs} ms; the handler is still running`,
      logDetails,
    );
    return {
      outcome: { kind: 'integration-timed-out', integrationTimeoutMs: target.integrationTimeoutMs },
      logDetails,
    };
  }
  if (ended.kind === 'threw') scope.log.error('handler failed', { ...logDetails, error: ended.error });
  if (ended.kind === 'throttled') scope.log.error(`throttled: ${ended.error.message}`, logDetails);
  if (ended.kind === 'timed-out') scope.log.error(`Task timed out after ${ended.timeoutMs} ms`, logDetails);
  return { outcome: ended, logDetails };
}

export function withTimeout<T>(promise: Promise<T>, timeoutMs: number): Promise<T | 'timed-out'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timed-out'>((resolve) => {
    timer = setTimeout(() => resolve('timed-out'), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** `POST /payments/{id}` → `post-payments-id`, a readable Lambda-style name for logs and ARNs. */
export function defaultFunctionName(method: string, path: string): string {
  const words = `${method} ${path}`.toLowerCase().match(/[a-z0-9]+/g) ?? [];
  return words.join('-');
}
