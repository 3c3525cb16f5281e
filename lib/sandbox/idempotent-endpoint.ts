import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import canonicalize from 'canonicalize';
import type { StoredResponse } from './attempt';
import { attempt } from './attempt';
import { ErrorType, invalidRequest, SandboxApiError } from './errors';
import type { FaultQueue, FaultTarget } from './faults';
import { headerValue, sendJson } from './http';
import type { IdempotencyLedger } from './idempotency-ledger';

/** The header a client sends its key in, and the one that marks a replayed answer (both Stripe's names). */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';
export const REPLAYED_HEADER = 'Idempotent-Replayed';

/** Stripe's limit on a key's length. */
const MAX_KEY_LENGTH = 255;

export type { StoredResponse } from './attempt';

/** What an endpoint that draws faults shares: the faults, its target among them, and the sandbox lifetime. */
export interface FaultedEndpoint {
  readonly faults: FaultQueue;
  readonly target: FaultTarget;
  /** Aborted when the sandbox closes, so that an injected delay does not outlive it. */
  readonly signal: AbortSignal;
}

/** What an idempotent endpoint (charges, emails) adds: its key space. */
export interface IdempotentEndpoint extends FaultedEndpoint {
  readonly ledger: IdempotencyLedger<StoredResponse>;
}

/** One request to an idempotent endpoint, already validated. */
export interface IdempotentRequest {
  readonly key: string;
  /** The canonical hash of the request body: "same body" means same JSON, whatever the key order or spacing. */
  readonly fingerprint: string;
  /** Does the work (records the charge or the email) and returns the response to remember. */
  readonly perform: () => StoredResponse;
}

/** The `Idempotency-Key` header, required on every idempotent endpoint. */
export function requireIdempotencyKey(req: IncomingMessage): string {
  const key = headerValue(req, IDEMPOTENCY_KEY_HEADER)?.trim();
  if (!key) throw invalidRequest(`The ${IDEMPOTENCY_KEY_HEADER} header is required on this endpoint.`);
  if (key.length > MAX_KEY_LENGTH) {
    throw invalidRequest(`The ${IDEMPOTENCY_KEY_HEADER} header is limited to ${MAX_KEY_LENGTH} characters.`);
  }
  return key;
}

/** A stable hash of a parsed JSON body. */
export function fingerprintBody(body: unknown): string {
  return createHash('sha256')
    .update(canonicalize(body) ?? '')
    .digest('hex');
}

/**
 * Serves one request through the endpoint's ledger: the first request with a key draws the next fault and does
 * the work; later ones replay its response (with `Idempotent-Replayed: true`) or are refused for a different body.
 *
 * The work never looks at the socket: a client that hangs up mid-request still gets its charge made, exactly as
 * with a real processor, and only the answer is lost.
 */
export async function serveIdempotently(
  res: ServerResponse,
  endpoint: IdempotentEndpoint,
  request: IdempotentRequest,
): Promise<void> {
  const outcome = await endpoint.ledger.run(request.key, request.fingerprint, () =>
    attempt(endpoint.faults.take(endpoint.target), request.perform, endpoint.signal),
  );
  switch (outcome.kind) {
    case 'mismatch':
      throw new SandboxApiError(
        400,
        ErrorType.idempotency,
        'Keys for idempotent requests can only be used with the same parameters they were first used with.',
      );
    case 'replayed':
      sendJson(res, outcome.response.status, outcome.response.body, { [REPLAYED_HEADER]: 'true' });
      return;
    case 'executed':
      if (outcome.execution.hangUp) res.destroy();
      else sendJson(res, outcome.execution.response.status, outcome.execution.response.body);
      return;
  }
}

/** One request to an endpoint that keeps no idempotency memory, already validated. */
export interface OnceRequest {
  /** Does the work (books the shipment) and returns the response. */
  readonly perform: () => StoredResponse;
  /**
   * The request reached the endpoint (after any time in transit); returns what marks it finished, called once its
   * work is done, or the attempt ended without it.
   */
  readonly arrive: () => () => void;
}

/**
 * Serves one request to an endpoint that keeps no idempotency memory (the warehouse's bookings): every request draws
 * the next fault and does the work, whatever key it carries, as so many real APIs do. A request `in_transit` is held
 * before it arrives: until then the endpoint knows nothing of it.
 */
export async function serveOnce(res: ServerResponse, endpoint: FaultedEndpoint, request: OnceRequest): Promise<void> {
  const fault = endpoint.faults.take(endpoint.target);
  if (fault?.mode === 'in_transit') await sleep(fault.ms, undefined, { signal: endpoint.signal });
  const finished = request.arrive();
  try {
    const perform = () => {
      const response = request.perform();
      finished();
      return response;
    };
    const execution = await attempt(fault, perform, endpoint.signal);
    if (execution.hangUp) res.destroy();
    else sendJson(res, execution.response.status, execution.response.body);
  } finally {
    finished();
  }
}
