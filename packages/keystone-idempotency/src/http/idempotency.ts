import { IDEMPOTENCY_KEY } from '@aws-lambda-powertools/commons';
import type middy from '@middy/core';
import type { APIGatewayProxyResult, Context } from 'aws-lambda';
import type { EffectOf, IdempotencyStore } from '../engine/contract.js';
import { InvalidKeyError, StepOutcomeUnknownError } from '../engine/errors.js';
import { fingerprint } from '../engine/fingerprint.js';
import { parseIdempotencyKey, scopedKey } from '../engine/key.js';
import type { AttemptEnd, ClaimedOperation, IdempotencyHandle, Settlement } from '../engine/operation.js';
import type { IdempotencyRecord } from '../engine/record.js';
import { beginOperation } from '../engine/run.js';
import { type StepEvent, StepMetric } from '../engine/steps.js';
import { accountIdOf } from './account.js';
import { answersEarly } from './early-response.js';
import { frontDoorOf, type HttpEvent, type HttpResult, requestHeader, requestOperation } from './front-door.js';
import { BodyEncodingError, rawBody } from './headers.js';
import { IdempotencyMetric } from './metrics.js';
import { ProblemType, requestProblem } from './problem.js';
import { fromStored, type HttpResponse, readResponse, respondAs, toStored, writeResponse } from './response.js';

/**
 * The context a handler sees under {@link httpIdempotency}: the operation's handle (defined by the engine), staging
 * the effects of the store the middleware is given. Name the store, `WithIdempotency<typeof store>` (or its type,
 * `WithIdempotency<PostgresStore>`; `WithIdempotency<IdempotencyStore<unknown>>` for a handler written for any
 * store), and staging a DynamoDB transaction item under a PostgreSQL store (or SQL under a DynamoDB one) is a compile
 * error at the staging line.
 *
 * A store, never an effect type: middy types a handler with the context it is declared with, and `.use()` adds each
 * middleware's context to it without comparing the two, so nothing the middleware declares can reach back to the
 * handler. Declared from the store, the handler's context cannot differ from the middleware's; an effect type written
 * by hand could.
 */
export type WithIdempotency<TStore extends IdempotencyStore<never>> = {
  idempotency: IdempotencyHandle<EffectOf<TStore>>;
};

/**
 * `TEvent` is the event type the callbacks below are given: any front door's ({@link HttpEvent}) unless a callback
 * names one (a REST-only function's `(event: APIGatewayProxyEvent) => ...` keeps compiling).
 */
export interface HttpIdempotencyOptions<TEffect, TEvent extends HttpEvent = HttpEvent> {
  readonly store: IdempotencyStore<TEffect>;
  /**
   * The tenant, from the authorizer. Default: {@link accountIdOf}: a Lambda authorizer's `accountId`, a JWT's `sub`,
   * an IAM caller's account; none behind an ALB, which passes no authorizer on (name it here).
   */
  readonly accountId?: (event: TEvent) => string | undefined;
  /**
   * The operation the key belongs to. Default: the method and route template (`POST /payments`: a REST API's
   * resource, an HTTP API's route key), or the method and the normalized path where there is none (a function URL,
   * an ALB, an HTTP API's `$default` route): repeated and trailing slashes dropped, dot segments removed and encoded
   * unreserved characters decoded (RFC 3986 §6.2.2), so `/payments/`, `//payments` and `/payments/./` are `/payments`.
   */
  readonly operation?: (event: TEvent) => string;
  readonly headerName?: string;
  /**
   * Where the client's key comes from when it isn't the Idempotency-Key header: a webhook's event id in the parsed
   * body, say. Return undefined for "missing" (a 400). Default: the header, parsed by `parseIdempotencyKey`.
   */
  readonly key?: (event: TEvent, context: Context) => string | undefined;
  /** Which handler responses are outcomes worth replaying. Default: 2xx, and 4xx except 408, 425 and 429. */
  readonly isStorable?: (statusCode: number) => boolean;
  /** Response headers kept with a stored response, besides Content-Type and Location. */
  readonly storedHeaders?: readonly string[];
  /**
   * Wait up to this long for an in-flight original instead of answering 409 at once, within the function's remaining
   * time (less a second of margin). Default 0.
   */
  readonly waitMs?: number;
  /**
   * Track each operation in the engine's recovery index until it completes (see `IdempotencyStore.findDue`), for a
   * handler whose effect lives in another system: an attempt whose client never returns is then finished by
   * recovery instead of being forgotten. Default false.
   */
  readonly recoverable?: boolean;
  readonly logger?: {
    warn(message: string, ...rest: unknown[]): void;
    error(message: string, ...rest: unknown[]): void;
  };
  /**
   * Where outcome counts go, one per event: Powertools' `Metrics` fits (`addMetric(name, 'Count', 1)`). The names
   * are {@link IdempotencyMetric}'s values, and `StepMetric`'s for each step of a multi-step handler.
   */
  readonly metrics?: { addMetric(name: string, unit: 'Count', value: number): void };
  /**
   * Runs on every replay, with the response about to be sent (the stored one, `Idempotent-Replayed: true` added), in
   * no front door's format, and the operation's record; what it returns is sent, written for the request's front
   * door. Powertools' `responseHook`: add headers to replays, say (`headers` is a list of `[name, value]` fields).
   * Never runs for a response the handler produced.
   */
  readonly responseHook?: (response: HttpResponse, record: IdempotencyRecord) => HttpResponse;
}

export const REPLAYED_HEADER = 'Idempotent-Replayed';
const ALWAYS_STORED_HEADERS = ['content-type', 'location'];
const TRANSIENT_4XX = new Set([408, 425, 429]);

export function defaultIsStorable(statusCode: number): boolean {
  return (
    (statusCode >= 200 && statusCode < 300) || (statusCode >= 400 && statusCode < 500 && !TRANSIENT_4XX.has(statusCode))
  );
}

/**
 * Idempotency for an HTTP handler, as a middy middleware, behind any front door: a REST API (payload 1.0), an HTTP API
 * (payload 2.0), a function URL or an ALB target, told apart by the event. Headers are read case-insensitively, all
 * their values included; base64 bodies are decoded (or fingerprinted as bytes); every answer, replays included, is
 * written in the format the request's front door expects, whatever format the handler answered in.
 *
 * - before: validates the key (400), scopes it to the caller's account and operation, fingerprints the body, and
 *   claims it. A replay, an in-flight duplicate (409 + Retry-After) and a reused key (422) answer here, before the
 *   handler runs; a replay is the stored response byte for byte plus `Idempotent-Replayed: true`.
 * - after: a storable response commits with the handler's staged effect items in one transaction; any other
 *   response (5xx, 429, ...) releases the key for a retry.
 * - onError: a thrown error releases the key; the error continues to the problem handler.
 *
 * Register it LAST (after body validation and the problem handler) so that rejected requests never touch the store.
 *
 * @example
 * export const handler = middy(createPayment)
 *   .use(problemErrorHandler())
 *   .use(validateJsonBody(PaymentRequest))
 *   .use(httpIdempotency({ store }));
 */
export function httpIdempotency<TEffect, TEvent extends HttpEvent = HttpEvent>(
  options: HttpIdempotencyOptions<TEffect, TEvent>,
): middy.MiddlewareObj<TEvent, HttpResult, Error, Context & { idempotency: IdempotencyHandle<TEffect> }> {
  const { store } = options;
  const headerName = options.headerName ?? 'Idempotency-Key';
  const keyOf = options.key;
  const tenantOf = options.accountId ?? accountIdOf;
  const operationOf = options.operation ?? requestOperation;
  const isStorable = options.isStorable ?? defaultIsStorable;
  const storedHeaders = new Set([
    ...ALWAYS_STORED_HEADERS,
    ...(options.storedHeaders ?? []).map((h) => h.toLowerCase()),
  ]);
  const logger = options.logger ?? console;
  const count = (name: string) => options.metrics?.addMetric(name, 'Count', 1);
  // One operation per invocation, keyed by the request object: middy reuses nothing across invocations.
  const operations = new WeakMap<object, ClaimedOperation<TEffect>>();

  return {
    // A replay, a duplicate in flight, a reused or bad key: answered here, after the cleanups other middlewares
    // registered (a metrics flush) have run, since middy skips their `after`.
    before: answersEarly(async function httpIdempotencyBefore(request) {
      const { event } = request;
      const accountId = tenantOf(event);
      if (!accountId) {
        // Without a tenant the key can't be scoped; storing it unscoped would let tenants see each other's responses.
        return requestProblem(request, {
          type: ProblemType.unauthenticated,
          title: 'Unauthenticated',
          status: 401,
          detail: 'The request carries no authenticated account.',
        });
      }
      const operation = operationOf(event);
      let key: string;
      try {
        key = scopedKey({
          accountId,
          operation,
          key: parseIdempotencyKey(keyOf ? keyOf(event, request.context) : requestHeader(event, headerName)),
        });
      } catch (error) {
        // A bad key, or an account or operation no store can keep as it is (a lone surrogate in a path): the client's.
        if (!(error instanceof InvalidKeyError)) throw error;
        count(IdempotencyMetric.keyInvalid);
        const missing = error.reason === 'missing';
        return requestProblem(request, {
          type: missing ? ProblemType.idempotencyKeyMissing : ProblemType.idempotencyKeyInvalid,
          title: missing ? 'Idempotency-Key required' : 'Invalid Idempotency-Key',
          status: 400,
          detail: error.message,
        });
      }
      const began = await beginOperation(
        store,
        {
          key,
          fingerprint: fingerprint({ operation, ...fingerprintedBody(event) }),
        },
        {
          waitMs: options.waitMs ?? 0,
          recoverable: options.recoverable ?? false,
          invocation: request.context,
          logger,
          ...(options.metrics ? { onStep: (event: StepEvent) => count(StepMetric[event.outcome]) } : {}),
        },
      );
      switch (began.kind) {
        case 'replay': {
          count(IdempotencyMetric.replayed);
          const replay = fromStored(began.response, { [REPLAYED_HEADER]: 'true' });
          return writeResponse(options.responseHook ? options.responseHook(replay, began.record) : replay, event);
        }
        case 'in_flight':
          count(IdempotencyMetric.inFlight);
          return inFlight(request, began.retryAfterMs, 'A request with this Idempotency-Key is still being processed.');
        case 'mismatch':
          count(IdempotencyMetric.mismatch);
          return requestProblem(request, {
            type: ProblemType.idempotencyKeyReused,
            title: 'Idempotency-Key reused',
            status: 422,
            detail: 'This Idempotency-Key was already used for a request with a different body.',
          });
        case 'acquired': {
          count(began.operation.lease.takeover ? IdempotencyMetric.takeover : IdempotencyMetric.claimed);
          operations.set(request, began.operation);
          request.context.idempotency = began.operation.handle;
          // A middleware registered after this one that answers early skips our `after`: give the key back then.
          (request.internal as Record<string, unknown>)[IDEMPOTENCY_KEY] = () => endUnfinished(request);
          return undefined;
        }
      }
    }),

    after: async function httpIdempotencyAfter(request) {
      const operation = operations.get(request);
      if (!operation) return;
      operations.delete(request);
      const { event } = request;
      // Whatever format the handler answered in, it is read as one response and written back in the request's.
      const response = readResponse(request.response, frontDoorOf(event));
      if (response) request.response = writeResponse(response, event);
      // The engine's policy: a deterministic answer commits with the staged effects; anything else releases the key.
      const storable = response !== undefined && isStorable(response.statusCode);
      const settled = await settle(
        operation,
        storable ? { kind: 'outcome', response: toStored(response, storedHeaders) } : { kind: 'transient' },
      );
      switch (settled.kind) {
        case 'committed':
          count(IdempotencyMetric.committed);
          return;
        case 'fenced':
          // Our lease was taken over while we worked (we outlived it): nothing of ours was written, and the new owner
          // will finish the operation under the same downstream key. Send the client back for that result.
          count(IdempotencyMetric.leaseLost);
          logger.warn('lease lost before commit; response discarded', { key: operation.lease.key });
          request.response = respondAs(
            event,
            inFlight(request, 1000, 'This request was superseded by a retry of the same operation.'),
          ) as HttpResult;
          return;
        case 'released':
          // The commit itself failed (the key is released now): the error goes on to the problem handler.
          if (storable) throw settled.error;
          return;
        case 'refused':
        case 'compensating': {
          // The operation was refused for good earlier: what this attempt answered is not what it stores.
          const answer = refusedAnswer(request, settled);
          if (answer === undefined) throw settled.kind === 'refused' ? settled.refusal : settled.error;
          request.response = respondAs(event, answer) as HttpResult;
        }
      }
    },

    // A thrown error releases the key; a step refused for good ends the operation with its stored answer, and a step
    // whose outcome can't be known yet sends the client back later. Anything else goes on to the problem handler.
    onError: answersEarly(async function httpIdempotencyOnError(request) {
      const operation = operations.get(request);
      if (!operation) return undefined;
      operations.delete(request);
      const settled = await settle(operation, { kind: 'transient', error: request.error });
      switch (settled.kind) {
        case 'refused':
        case 'compensating':
          return refusedAnswer(request, settled);
        case 'released':
          if (!(request.error instanceof StepOutcomeUnknownError)) return undefined;
          return inFlight(
            request,
            request.error.retryAfterMs ?? 1000,
            'An outside call made for this request may still be under way; its outcome is not known yet.',
          );
        default:
          return undefined;
      }
    }),
  };

  /**
   * What a request answers for an operation refused for good: the refusal's stored response once its compensations
   * have run (undefined without one: abandoned, the refusal goes on as an error), or 409 while they are still failing.
   */
  function refusedAnswer(
    request: { event: TEvent; internal?: unknown },
    settled: Extract<Settlement, { kind: 'refused' | 'compensating' }>,
  ): HttpResult | APIGatewayProxyResult | undefined {
    if (settled.kind === 'compensating') {
      logger.warn('a compensation failed; the operation is tried again later', {
        failures: settled.failures,
        retryAfterMs: settled.retryAfterMs,
        error: String(settled.error),
      });
      return inFlight(
        request,
        settled.retryAfterMs,
        'This operation was refused and is being undone; retry later for its final answer.',
      );
    }
    // The outside system's own words go to the log, never into the answer.
    logger.warn('operation refused for good', { step: settled.refusal.step, reason: settled.refusal.message });
    if (settled.response === undefined) return undefined;
    count(IdempotencyMetric.committed);
    return writeResponse(fromStored(settled.response), request.event);
  }

  async function endUnfinished(request: object): Promise<void> {
    const operation = operations.get(request);
    if (!operation) return;
    operations.delete(request);
    await settle(operation, { kind: 'transient' });
  }

  /** Settles through the engine, counting a release only when one happened, and logging one that could not. */
  async function settle(operation: ClaimedOperation<TEffect>, end: AttemptEnd): Promise<Settlement> {
    const settled = await operation.settle(end);
    if (settled.kind === 'released') {
      if (settled.released) count(IdempotencyMetric.released);
      // The lease will run out on its own; the next retry takes the record over then.
      else logger.error('could not release idempotency key', { key: operation.lease.key });
    }
    return settled;
  }
}

/**
 * The body as the fingerprint sees it. Bytes that are not UTF-8 (a base64 body; a route with body validation never
 * gets this far with one) are hashed as sent, tagged so they can't pass for text: decoded, they would all turn into
 * U+FFFD and two different bodies would share one fingerprint.
 */
function fingerprintedBody(event: HttpEvent): { body: string | null; contentType: string | undefined } {
  const contentType = requestHeader(event, 'content-type');
  try {
    return { body: rawBody(event), contentType };
  } catch (error) {
    if (!(error instanceof BodyEncodingError)) throw error;
    return { body: `\u0000bytes-base64:${event.body}`, contentType: 'application/octet-stream' };
  }
}

function inFlight(request: { internal?: unknown }, retryAfterMs: number, detail: string): APIGatewayProxyResult {
  return requestProblem(
    request,
    { type: ProblemType.requestInFlight, title: 'Request in flight', status: 409, detail },
    { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) },
  );
}
