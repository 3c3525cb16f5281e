import { randomIds } from './clock.js';
import type { IdempotencyStore } from './contract.js';
import { ConfigurationError, IdempotencyError } from './errors.js';
import { ClaimedOperation } from './operation.js';

/**
 * The one switch that turns idempotency off, for unit tests of a handler that should not need a database:
 * `KEYSTONE_IDEMPOTENCY_DISABLED=true` (Powertools' `POWERTOOLS_IDEMPOTENCY_DISABLED`). Every adapter and
 * `makeIdempotent` then run the work on every call, under a fresh downstream key, and touch no store: nothing is
 * claimed, committed or released, and what the work stages is dropped.
 *
 * It is refused inside a Lambda function (where `AWS_LAMBDA_FUNCTION_NAME` is set): a switch left on in a deployed
 * function would silently do every retried payment again. The first operation there throws instead.
 */
export const IDEMPOTENCY_DISABLED_ENV = 'KEYSTONE_IDEMPOTENCY_DISABLED';

/**
 * Read on every operation, so a test can turn it on and off between calls.
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export function idempotencyDisabled(): boolean {
  const env = typeof process === 'undefined' ? undefined : process.env;
  const value = env?.[IDEMPOTENCY_DISABLED_ENV]?.trim().toLowerCase();
  if (value === undefined || value === '' || value === 'false' || value === '0') return false;
  if (value !== 'true' && value !== '1') {
    throw new ConfigurationError(`${IDEMPOTENCY_DISABLED_ENV} must be true or false, got ${JSON.stringify(value)}`);
  }
  if (env?.AWS_LAMBDA_FUNCTION_NAME) {
    throw new ConfigurationError(
      `${IDEMPOTENCY_DISABLED_ENV} is for unit tests and is refused in a Lambda function ` +
        `(${env.AWS_LAMBDA_FUNCTION_NAME}): with it, every retry would run the work again`,
    );
  }
  return true;
}

/**
 * An operation that records nothing: what an adapter gets for its work while idempotency is switched off. Its
 * handle stages as usual (the store's limit still applies, so a test still catches too many effects), and settling
 * it writes nothing.
 *
 * @internal the package's own stores and adapters use it; not exported by the package
 */
export function unrecordedOperation<TEffect>(
  store: IdempotencyStore<TEffect>,
  identity: { readonly key: string; readonly fingerprint: string },
): ClaimedOperation<TEffect> {
  const now = Date.now();
  return new ClaimedOperation(new UnrecordedStore(store), {
    key: identity.key,
    leaseToken: randomIds.leaseToken(),
    leaseExpiresAt: now + store.leaseMs,
    downstreamKey: randomIds.downstreamKey(),
    fingerprint: identity.fingerprint,
    attempt: 1,
    createdAt: now,
    takeover: false,
    recoverable: false,
  });
}

/**
 * Commits, releases and abandons as no-ops; anything else would mean the switch leaked into a store's other uses.
 */
class UnrecordedStore<TEffect> implements IdempotencyStore<TEffect> {
  constructor(private readonly store: IdempotencyStore<TEffect>) {}
  get leaseMs() {
    return this.store.leaseMs;
  }
  get clock() {
    return this.store.clock;
  }
  get ttlSeconds() {
    return this.store.ttlSeconds;
  }
  get maxEffects() {
    return this.store.maxEffects;
  }
  /** The store's own refusal of another store's effect applies too, so a unit test still catches it. */
  checkEffect(effect: unknown, index: number): void {
    this.store.checkEffect?.(effect, index);
  }
  get maxSteps() {
    return this.store.maxSteps;
  }
  get maxCheckpointBytes() {
    return this.store.maxCheckpointBytes;
  }
  async commit(): Promise<void> {}
  /** Steps run as usual, and record nothing: each runs on every call, like the rest of the work. */
  async checkpoint(): Promise<void> {}
  async release(): Promise<boolean> {
    return true;
  }
  claim(): never {
    throw unreachable('claim');
  }
  /** A step refused for good ends its operation here too: compensated, then abandoned (nothing to record). */
  async abandon(): Promise<boolean> {
    return true;
  }
  resume(): never {
    throw unreachable('resume');
  }
  findDue(): never {
    throw unreachable('findDue');
  }
  get(): never {
    throw unreachable('get');
  }
  claimAndCommit(): never {
    throw unreachable('claimAndCommit');
  }
}

function unreachable(method: string): IdempotencyError {
  return new IdempotencyError(`an unrecorded operation's store has no ${method}`);
}
