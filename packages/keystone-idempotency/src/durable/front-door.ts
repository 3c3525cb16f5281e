import canonicalize from 'canonicalize';
import type { IdempotencyStore } from '../engine/contract.js';
import { InvalidKeyError } from '../engine/errors.js';
import { fingerprint } from '../engine/fingerprint.js';
import { parseIdempotencyKey, scopedKey } from '../engine/key.js';
import { runIdempotently } from '../engine/run.js';
import { accountIdOf } from '../http/account.js';
import { type HttpEvent, type HttpResult, requestHeader, requestOperation } from '../http/front-door.js';
import { BodyEncodingError, rawBody } from '../http/headers.js';
import { REPLAYED_HEADER } from '../http/idempotency.js';
import { DEFAULT_PROBLEM_TYPE_BASE, type ProblemDetails, ProblemType, problemResponse } from '../http/problem.js';
import { respondAs } from '../http/response.js';
import { ExecutionNameTakenError } from './errors.js';
import { executionName } from './execution-name.js';
import type { DurableExecutions, ExecutionState } from './executions.js';

/**
 * What a durable function started by {@link durableFrontDoor} receives as its event: the request's JSON body, and
 * the account and stored key it runs for (a step's records and a downstream call can name them).
 */
export interface DurableRequest<TInput = unknown> {
  readonly input: TInput;
  readonly accountId: string;
  readonly key: string;
}

/** What the front door stores under the client's key: the execution it started. */
interface StartedRecord {
  readonly executionArn: string;
  readonly executionName: string;
}

/** The front door's own problem type: the execution ended without a result (it failed, timed out, was stopped). */
export const DurableProblemType = { executionFailed: 'execution-failed' } as const;

export interface DurableFrontDoorOptions<TEffect> {
  /** Holds each key's fingerprint and the execution it started. */
  readonly store: IdempotencyStore<TEffect>;
  readonly executions: DurableExecutions;
  /** The status URL of an execution: where a client polls while it runs. Default `/executions/{id}`. */
  readonly statusUrl?: (executionId: string) => string;
  /** Seconds a client is told to wait before polling (`Retry-After` of a 202). Default 1. */
  readonly retryAfterSeconds?: number;
  /** The tenant. Default {@link accountIdOf} (the authorizer's account). */
  readonly accountId?: (event: HttpEvent) => string | undefined;
  /** The operation a key belongs to. Default the method and route (`POST /approvals`). */
  readonly operation?: (event: HttpEvent) => string;
  readonly headerName?: string;
  readonly problemTypeBase?: string;
}

/**
 * An HTTP front door that starts a Lambda durable execution per idempotency key, for work that outlasts one
 * invocation (an approval that takes days):
 *
 * ```
 *  POST + Idempotency-Key ─► claim (scoped key, body fingerprint) ─► Invoke(DurableExecutionName = executionName(key))
 *        │                                                            └─ commit { executionArn } with the key
 *        ├─ same key, same body ─► the stored execution, described now: 202 + Location while it runs, 200 + its result
 *        ├─ same key, other body ─► 422 idempotency-key-reused        (also when Lambda holds the name, other payload)
 *        └─ missing or bad key ─► 400; no account ─► 401; a start in flight ─► 409 + Retry-After
 * ```
 *
 * The name is derived from the key, so a start whose commit was lost (a crash between Invoke and commit) is started
 * again by the retry under the same name and the same payload, and Lambda answers the execution it already has:
 * one execution per key. The payload is the canonical JSON of the body (RFC 8785), so a re-sent body that differs in
 * spacing or member order is the same payload to Lambda too.
 *
 * @example
 * export const handler = durableFrontDoor({ store, executions: lambdaDurableExecutions({ client, functionName }) });
 */
export function durableFrontDoor<TEffect>(
  options: DurableFrontDoorOptions<TEffect>,
): (event: HttpEvent) => Promise<HttpResult> {
  const base = options.problemTypeBase ?? DEFAULT_PROBLEM_TYPE_BASE;
  const tenantOf = options.accountId ?? accountIdOf;
  const operationOf = options.operation ?? requestOperation;
  const headerName = options.headerName ?? 'Idempotency-Key';
  const problem = (event: HttpEvent, details: ProblemDetails, headers?: Record<string, string>) =>
    respondAs(event, problemResponse(details, headers, base)) as HttpResult;

  return async function durableFrontDoorHandler(event) {
    const accountId = tenantOf(event);
    if (!accountId) {
      return problem(event, {
        type: ProblemType.unauthenticated,
        title: 'Unauthenticated',
        status: 401,
        detail: 'The request carries no authenticated account.',
      });
    }
    const operation = operationOf(event);
    let key: string;
    try {
      key = scopedKey({ accountId, operation, key: parseIdempotencyKey(requestHeader(event, headerName)) });
    } catch (error) {
      if (!(error instanceof InvalidKeyError)) throw error;
      const missing = error.reason === 'missing';
      return problem(event, {
        type: missing ? ProblemType.idempotencyKeyMissing : ProblemType.idempotencyKeyInvalid,
        title: missing ? 'Idempotency-Key required' : 'Invalid Idempotency-Key',
        status: 400,
        detail: error.message,
      });
    }
    const body = jsonBody(event);
    if (body.kind === 'invalid') {
      return problem(event, {
        type: ProblemType.invalidBody,
        title: 'Invalid body',
        status: 400,
        detail: body.detail,
        errors: [{ path: '', message: body.detail }],
      });
    }
    const name = executionName(key);
    const payload: DurableRequest = { input: body.value, accountId, key };
    const outcome = await runIdempotently<StartedRecord, TEffect>(
      options.store,
      { key, fingerprint: fingerprint({ operation, body: body.canonical, contentType: 'application/json' }) },
      async () => {
        const started = await options.executions.start({ name, payload: canonicalize(payload) ?? '' });
        return { executionArn: started.executionArn, executionName: name };
      },
    );
    switch (outcome.kind) {
      case 'committed':
        return answer(event, outcome.result, {});
      case 'replay':
        return answer(event, outcome.result, { [REPLAYED_HEADER]: 'true' });
      case 'in_flight':
        return problem(
          event,
          {
            type: ProblemType.requestInFlight,
            title: 'Request in flight',
            status: 409,
            detail: 'A request with this Idempotency-Key is still starting its execution.',
          },
          { 'Retry-After': String(Math.max(1, Math.ceil(outcome.retryAfterMs / 1000))) },
        );
      case 'mismatch':
        return reused(event);
      case 'fenced':
        throw outcome.error;
      case 'failed':
        // Our record of the key expired, Lambda still keeps its execution, and this body is another one.
        if (outcome.error instanceof ExecutionNameTakenError) return reused(event);
        throw outcome.error;
    }
  };

  function reused(event: HttpEvent): HttpResult {
    return problem(event, {
      type: ProblemType.idempotencyKeyReused,
      title: 'Idempotency-Key reused',
      status: 422,
      detail: 'This Idempotency-Key was already used for a request with a different body.',
    });
  }

  async function answer(event: HttpEvent, started: StartedRecord, headers: Record<string, string>) {
    const state = await options.executions.describe(started.executionArn);
    const statusUrl = (options.statusUrl ?? defaultStatusUrl)(executionId(started.executionArn));
    return respondAs(
      event,
      executionResponse(state, statusUrl, options.retryAfterSeconds ?? 1, headers, base),
    ) as HttpResult;
  }
}

export interface DurableExecutionStatusOptions {
  readonly executions: DurableExecutions;
  /** The execution's id from the request (the last segment of the status URL). Default the path's last segment. */
  readonly executionId?: (event: HttpEvent) => string | undefined;
  readonly accountId?: (event: HttpEvent) => string | undefined;
  readonly retryAfterSeconds?: number;
  readonly problemTypeBase?: string;
}

/**
 * The status URL's handler (`GET /executions/{id}`): the execution's state as the front door answers it, to the
 * account that started it only. Another account's execution, or an id that names none, is a 404 alike.
 */
export function durableExecutionStatus(
  options: DurableExecutionStatusOptions,
): (event: HttpEvent) => Promise<HttpResult> {
  const base = options.problemTypeBase ?? DEFAULT_PROBLEM_TYPE_BASE;
  const tenantOf = options.accountId ?? accountIdOf;
  return async function durableExecutionStatusHandler(event) {
    const accountId = tenantOf(event);
    const id = (options.executionId ?? lastPathSegment)(event);
    const arn = id === undefined ? undefined : executionArnOf(id);
    const notFound = () =>
      respondAs(
        event,
        problemResponse({ type: 'about:blank', title: 'Not Found', status: 404, detail: 'No such execution.' }),
      ) as HttpResult;
    if (!accountId || arn === undefined) return notFound();
    let state: ExecutionState;
    try {
      state = await options.executions.describe(arn);
    } catch (error) {
      if ((error as { name?: unknown }).name === 'ResourceNotFoundException') return notFound();
      throw error;
    }
    if (ownerOf(state.input) !== accountId) return notFound();
    const url = requestPath(event);
    return respondAs(event, executionResponse(state, url, options.retryAfterSeconds ?? 1, {}, base)) as HttpResult;
  };
}

function executionResponse(
  state: ExecutionState,
  statusUrl: string,
  retryAfterSeconds: number,
  headers: Record<string, string>,
  base: string,
) {
  switch (state.status) {
    case 'RUNNING':
      return {
        statusCode: 202,
        headers: {
          'Content-Type': 'application/json',
          Location: statusUrl,
          'Retry-After': String(retryAfterSeconds),
          ...headers,
        },
        body: JSON.stringify({ status: 'running', statusUrl }),
      };
    case 'SUCCEEDED':
      return {
        statusCode: 200,
        headers: { 'Content-Type': 'application/json', 'Content-Location': statusUrl, ...headers },
        body: JSON.stringify(state.result ?? null),
      };
    default:
      // The work failed for good, not the client's request: a 502 that says which way it ended, and nothing more.
      return problemResponse(
        {
          type: DurableProblemType.executionFailed,
          title: 'Execution failed',
          status: 502,
          detail: `The execution ended ${state.status.toLowerCase().replace('_', ' ')}.`,
          execution: statusUrl,
        },
        headers,
        base,
      );
  }
}

/** An execution's id for a URL: its ARN, base64url (ARNs hold `:` and `/`). Opaque to the client. */
export function executionId(executionArn: string): string {
  return Buffer.from(executionArn, 'utf8').toString('base64url');
}

const EXECUTION_ARN =
  /^arn:[A-Za-z0-9-]+:lambda:[A-Za-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]+:[^/]+\/durable-execution\//;
const LOCAL_ARN = /^arn:local:/;

function executionArnOf(id: string): string | undefined {
  if (!/^[A-Za-z0-9_-]{1,1400}$/.test(id)) return undefined;
  const arn = Buffer.from(id, 'base64url').toString('utf8');
  return EXECUTION_ARN.test(arn) || LOCAL_ARN.test(arn) ? arn : undefined;
}

function ownerOf(input: string | undefined): string | undefined {
  if (input === undefined) return undefined;
  try {
    const parsed = JSON.parse(input) as Partial<DurableRequest>;
    return typeof parsed.accountId === 'string' ? parsed.accountId : undefined;
  } catch {
    return undefined;
  }
}

function defaultStatusUrl(id: string): string {
  return `/executions/${id}`;
}

function requestPath(event: HttpEvent): string {
  const e = event as { path?: string; rawPath?: string };
  return e.rawPath ?? e.path ?? '';
}

function lastPathSegment(event: HttpEvent): string | undefined {
  const segment = requestPath(event).split('/').filter(Boolean).pop();
  return segment === undefined ? undefined : decodeURIComponent(segment);
}

type JsonBody =
  | { readonly kind: 'json'; readonly value: unknown; readonly canonical: string }
  | { readonly kind: 'invalid'; readonly detail: string };

/** The body as JSON (an absent body is `null`): what the execution gets, and what the fingerprint hashes. */
function jsonBody(event: HttpEvent): JsonBody {
  let text: string | null;
  try {
    text = rawBody(event);
  } catch (error) {
    if (!(error instanceof BodyEncodingError)) throw error;
    return { kind: 'invalid', detail: 'The body is not UTF-8.' };
  }
  if (text === null || text.trim() === '') return { kind: 'json', value: null, canonical: 'null' };
  try {
    const value: unknown = JSON.parse(text);
    return { kind: 'json', value, canonical: canonicalize(value) ?? 'null' };
  } catch {
    return { kind: 'invalid', detail: 'The body is not JSON.' };
  }
}
