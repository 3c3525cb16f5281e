import type { IdempotencyStore } from './contract.js';
import { ConfigurationError, InvalidKeyError, KeyReusedError, OperationInFlightError } from './errors.js';
import { fingerprint, selectedKey, selectionFingerprint } from './fingerprint.js';
import { MAX_KEY_LENGTH, scopedKey } from './key.js';
import type { IdempotencyHandle } from './operation.js';
import type { IdempotencyRecord } from './record.js';
import { type InvocationTime, type OperationIdentity, runIdempotently } from './run.js';
import type { StepObserver } from './steps.js';

export interface MakeIdempotentOptions<TInput, TEffect, TResult = unknown> {
  readonly store: IdempotencyStore<TEffect>;
  /** The operation, e.g. `book-shipment`: keys are scoped to it, so two functions never share a key by accident. */
  readonly name: string;
  /**
   * The key, taken from the input: a business key (an order id, an event's id) that stays the same when the same
   * call is made again. Or a subset of the input that names the call (`(event) => [event.detail.customerId,
   * event.detail.orderId]`, Powertools' `eventKeyJmesPath`): any value other than a string is hashed from its
   * canonical JSON. Nothing selected (an empty string, undefined, null, or a subset of only those), a key longer
   * than 255 characters, or a key (or `scope`) that a store can't keep as it is (a NUL, or a lone surrogate such as
   * `"\ud800"` in a JSON event, which both stores would keep as U+FFFD, joining another key's operation) throws
   * {@link InvalidKeyError} before anything is stored.
   */
  readonly key: (input: TInput) => unknown;
  /**
   * Whose key it is (a tenant), when keys must be kept apart further than by `name`. Default: `name`.
   */
  readonly scope?: (input: TInput) => string;
  /**
   * What must be equal for a second call under the same key to count as the same call. A call with the key of an
   * earlier one and other input throws {@link KeyReusedError} instead of returning the earlier call's result.
   *
   * - Default: the whole input, as canonical JSON (RFC 8785, as the HTTP adapter compares a body: member order,
   *   whitespace and number spelling don't count; members that JSON drops, `undefined` and functions, don't either).
   * - A selection narrows it, e.g. `(event) => event.detail`: an EventBridge event delivered twice, or re-sent with
   *   a new `id` and `time`, is still the same call. Powertools' `payloadValidationJmesPath`, as a function.
   * - `'key-only'`: the key alone decides; a later call with the key returns the first call's result whatever its
   *   input. Only where the key names the whole call (an event id, a message id).
   *
   * Changing it on a live function changes stored fingerprints: until records expire (the store's TTL), keys stored
   * under the old setting come back as {@link KeyReusedError}.
   */
  readonly fingerprint?: ((input: TInput) => unknown) | 'key-only';
  /**
   * Wait up to this long for a call in flight with the same key to finish (and return its result) instead of
   * throwing {@link OperationInFlightError} at once. Keep it within the caller's remaining time. Default 0.
   */
  readonly waitMs?: number;
  /**
   * Track each operation in the recovery index until it completes (see `IdempotencyStore.findDue`), for work whose
   * effect lives in another system: an attempt whose caller never returns is then finished by recovery. Default
   * false.
   */
  readonly recoverable?: boolean;
  /** Told once when the store's lease is raised to cover a Lambda function's remaining time. Default `console`. */
  readonly logger?: { warn(message: string, details: Record<string, unknown>): void };
  /** Told each step's outcome (`idempotency.step`): count them under `StepMetric`'s names. */
  readonly onStep?: StepObserver;
  /**
   * Runs on every replay (never on a call that ran the function), with the stored result and the operation's
   * record; what it returns is what the call returns. Powertools' `responseHook`: mark a replay, or add what the
   * stored result lacks.
   */
  readonly responseHook?: (result: TResult, record: IdempotencyRecord) => TResult;
}

/**
 * Makes any async function idempotent: EventBridge targets, Step Functions tasks, direct invocations, or a function
 * inside a handler. The function gets the operation's handle after its input; the first call with a key runs it and
 * commits what it staged with the key's completion (one fenced transaction); a later call with the same key returns
 * the stored result without running it. A call that throws releases the key (keeping the downstream key) and
 * rethrows; the next call takes the operation over.
 *
 * Results are stored as JSON, and a replay returns the stored JSON, parsed: return plain data. Other outcomes throw:
 * {@link OperationInFlightError} while another call holds the key, {@link KeyReusedError} for the key with other
 * input (by default the whole input must be equal: see `fingerprint`), `LeaseLostError` when this call outlived its lease and another took the operation over (nothing of
 * this call was written; the other call's result is the operation's).
 *
 * Arguments after the input are passed through (a Lambda handler's context, say), so the wrapped function can be
 * exported as a handler as it is. When one of them is a Lambda context, the claim's lease covers the function's
 * remaining time (plus `LEASE_MARGIN_MS`) even if the store's lease is shorter: a call still running can never be
 * taken over by another.
 *
 * @example
 * export const handler = makeIdempotent(
 *   async (event: EventBridgeEvent<'OrderPlaced', Order>, idempotency) => {
 *     const shipment = await carrier.book(event.detail, { idempotencyKey: idempotency.downstreamKey });
 *     idempotency.stage({ Put: { TableName: 'shipments', Item: shipmentRow(shipment) } });
 *     return { shipmentId: shipment.id };
 *   },
 *   // The order decides; the event's own id and time don't (the same order placed twice books one shipment).
 *   { store, name: 'book-shipment', key: (event) => event.detail.orderId, fingerprint: (event) => event.detail },
 * );
 */
export function makeIdempotent<TInput, TResult, TEffect, TRest extends unknown[] = []>(
  // The effect type is the store's (`options.store`), never inferred from the function: a function written for
  // another store's handle is then a compile error, not a second candidate that widens TEffect.
  fn: (input: TInput, idempotency: IdempotencyHandle<NoInfer<TEffect>>, ...rest: TRest) => Promise<TResult>,
  options: MakeIdempotentOptions<TInput, TEffect, NoInfer<TResult>>,
): (input: TInput, ...rest: TRest) => Promise<TResult> {
  if (!options.name) throw new ConfigurationError('an idempotent function needs a name: its keys are scoped to it');
  if (options.waitMs !== undefined && !(options.waitMs >= 0)) {
    throw new ConfigurationError(`waitMs must be 0 or more, got ${options.waitMs}`);
  }
  const { store, name } = options;

  return async function idempotent(input: TInput, ...rest: TRest): Promise<TResult> {
    const outcome = await runIdempotently<TResult, TEffect>(
      store,
      identityOf(input, options),
      (handle) => fn(input, handle, ...rest),
      {
        waitMs: options.waitMs ?? 0,
        recoverable: options.recoverable ?? false,
        // A Lambda handler's context, passed through after the input: the lease then covers its remaining time.
        invocation: rest.find(isInvocation),
        ...(options.logger ? { logger: options.logger } : {}),
        ...(options.onStep ? { onStep: options.onStep } : {}),
      },
    );
    switch (outcome.kind) {
      case 'committed':
        return outcome.result;
      case 'replay':
        return options.responseHook ? options.responseHook(outcome.result, outcome.record) : outcome.result;
      case 'in_flight':
        throw new OperationInFlightError(outcome.key, outcome.retryAfterMs, outcome.record);
      case 'mismatch':
        throw new KeyReusedError(outcome.key, outcome.record);
      case 'fenced':
        throw outcome.error;
      case 'failed':
        throw outcome.error;
    }
  };

  function identityOf(
    input: TInput,
    { key, scope, fingerprint: fingerprinted }: MakeIdempotentOptions<TInput, TEffect, TResult>,
  ) {
    const own = selectedKey(key(input));
    if (own === undefined) {
      throw new InvalidKeyError(`${name}: the key taken from the input is empty`, 'empty');
    }
    if (own.length > MAX_KEY_LENGTH) {
      throw new InvalidKeyError(`${name}: the key must be at most ${MAX_KEY_LENGTH} characters`, 'too_long');
    }
    const identity: OperationIdentity = {
      key: named(() => scopedKey({ accountId: scope?.(input) ?? name, operation: name, key: own })),
      // Under one key, the fingerprint decides "same call or not": by default the whole input; a selection of it;
      // or, opted into, the key itself.
      fingerprint:
        fingerprinted === 'key-only'
          ? fingerprint({ operation: name, body: own, contentType: 'text/plain' })
          : inputFingerprint(fingerprinted ? fingerprinted(input) : input),
    };
    return identity;
  }

  /** The canonical JSON of the input (or of a selection of it); one with no JSON form is refused before the claim. */
  function inputFingerprint(selected: unknown): string {
    try {
      return selectionFingerprint(name, selected);
    } catch (error) {
      // A BigInt, a cycle: nothing to compare a later call with. Refused here, before anything is stored.
      throw new ConfigurationError(
        `${name}: the input has no JSON form to fingerprint (${error instanceof Error ? error.message : String(error)}); ` +
          "select what identifies the call with `fingerprint: (input) => ...`, or pass fingerprint: 'key-only'",
      );
    }
  }

  /** The scoped key, its refusal naming the function, as the checks above do. */
  function named(stored: () => string): string {
    try {
      return stored();
    } catch (error) {
      if (!(error instanceof InvalidKeyError)) throw error;
      throw new InvalidKeyError(`${name}: ${error.message}`, error.reason);
    }
  }
}

function isInvocation(value: unknown): value is InvocationTime {
  return typeof (value as InvocationTime | undefined)?.getRemainingTimeInMillis === 'function';
}
