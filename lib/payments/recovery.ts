import {
  EffectConditionFailedError,
  type IdempotencyStore,
  LeaseLostError,
  type RecoverDueOptions,
  type RecoveryReport,
  type RecoveryResolver,
  type RecoveryVerdict,
  recoverDue,
} from 'keystone-idempotency/engine';
import { type ChargeReference, paymentCreated, paymentFromCharge, referenceOf } from './payment';
import type { Charge, ProcessorClient } from './processor-client';
import type { PaymentsRepository } from './store';

/**
 * Payments whose client never came back. A charge made under one of our downstream keys must end as exactly one
 * payment row and the operation's stored 201, whatever the client does. Two witnesses finish it:
 *
 * - the processor's `charge.succeeded` event (settlement calls {@link completeFromCharge} when the payment it names
 *   is not recorded), within seconds of the charge;
 * - the completer ({@link recoverPayments}, on a schedule), for events that never arrive: it asks the processor
 *   what it made under each unfinished operation's downstream key.
 *
 * Both take the operation over with the engine's fenced takeover and commit the row built by the same
 * `paymentFromCharge` the handler uses, so the stored 201 is the one the handler would have answered.
 */

/** Counted by whichever function finished or gave up an operation (service dimension `payment-recovery`). */
export { RecoveryMetric } from '../metrics/definitions';

export interface PaymentRecoveryDeps<TEffect> {
  readonly store: IdempotencyStore<TEffect>;
  readonly payments: PaymentsRepository<TEffect>;
}

/**
 * What recovery commits for a charge: the payment row (or, if a row for this charge is already there, a check that
 * it is), and the 201 that a retry of the operation will replay.
 */
export async function paymentCompletion<TEffect>(
  payments: PaymentsRepository<TEffect>,
  charge: Charge,
  reference: ChargeReference,
): Promise<{ response: ReturnType<typeof paymentCreated>; effects: TEffect[] }> {
  const payment = paymentFromCharge(charge, reference.payment_id);
  const existing = await payments.getPayment(reference.account_id, reference.payment_id);
  const effect = existing
    ? payments.confirmPayment(reference.account_id, reference.payment_id, charge.id)
    : payments.putPayment(reference.account_id, payment, reference.downstream_key);
  return { response: paymentCreated(payment), effects: [effect] };
}

/** What became of a charge whose payment was not recorded when its witness looked. */
export type ChargeCompletion =
  /** Recovery took the operation over and committed the payment with it: the client never came back. */
  | { readonly kind: 'completed' }
  /** The operation had committed meanwhile (its owner finished); the payment is there now. */
  | { readonly kind: 'already-completed' }
  /**
   * The operation's record is gone (finished, then past its TTL; an unfinished one never expires): the payment was
   * recorded on its own, so the money is not lost.
   */
  | { readonly kind: 'recorded-without-operation' }
  /** The operation's owner still holds a live lease: it may yet commit. Look again after `retryAfterMs`. */
  | { readonly kind: 'owner-live'; readonly retryAfterMs: number }
  /** Another owner took the operation, or the row changed, between our read and our write: look again soon. */
  | { readonly kind: 'contended' }
  /** The charge carries no reference to an operation of ours (made elsewhere, or before references existed). */
  | { readonly kind: 'untracked' };

/**
 * Finishes the operation behind a charge whose payment is not recorded: the witness path (a webhook event).
 * The operation's owner keeps it while its lease is live; once released, abandoned or run out, this takes it over
 * (only the generation the charge was made under) and commits the payment and its 201 in one transaction.
 */
export async function completeFromCharge<TEffect>(
  deps: PaymentRecoveryDeps<TEffect>,
  charge: Charge,
): Promise<ChargeCompletion> {
  const reference = referenceOf(charge);
  if (!reference) return { kind: 'untracked' };
  const resumed = await deps.store.resume(reference.operation_key, { downstreamKey: reference.downstream_key });
  switch (resumed.kind) {
    case 'in_flight':
      return { kind: 'owner-live', retryAfterMs: resumed.retryAfterMs };
    case 'completed':
      return { kind: 'already-completed' };
    case 'absent': {
      const payment = paymentFromCharge(charge, reference.payment_id);
      await deps.payments.recordPayment(reference.account_id, payment, reference.downstream_key);
      return { kind: 'recorded-without-operation' };
    }
    case 'acquired': {
      const { response, effects } = await paymentCompletion(deps.payments, charge, reference);
      try {
        await deps.store.commit(resumed.lease, response, effects);
        return { kind: 'completed' };
      } catch (error) {
        if (error instanceof LeaseLostError) return { kind: 'contended' };
        await deps.store.release(resumed.lease).catch(() => undefined);
        if (error instanceof EffectConditionFailedError) return { kind: 'contended' };
        throw error;
      }
    }
  }
}

/**
 * The completer's question to the processor for one unfinished operation: what was charged under its downstream
 * key? A charge completes the payment; none abandons the operation; no answer (the processor down, or the request
 * still running there) leaves it for the next run.
 */
export function chargeLookup<TEffect>(
  deps: PaymentRecoveryDeps<TEffect> & { readonly processor: ProcessorClient },
): RecoveryResolver<TEffect> {
  return async function lookUpCharge(lease): Promise<RecoveryVerdict<TEffect>> {
    const lookup = await deps.processor.findCharge(lease.downstreamKey);
    switch (lookup.kind) {
      case 'none':
        return { kind: 'abandon' };
      case 'pending':
        return { kind: 'retry', reason: 'the processor is still working on a request under this key' };
      case 'unavailable':
        return { kind: 'retry', reason: `the processor could not be asked (${lookup.status ?? 'no answer'})` };
      case 'found': {
        const reference = referenceOf(lookup.charge);
        if (reference?.downstream_key !== lease.downstreamKey) {
          // Every charge this service makes carries its reference; one without it under our key is a bug to see.
          return { kind: 'retry', reason: `charge ${lookup.charge.id} carries no reference to this operation` };
        }
        return { kind: 'complete', ...(await paymentCompletion(deps.payments, lookup.charge, reference)) };
      }
    }
  };
}

/** The operation `POST /payments` claims its keys under (the HTTP adapter's method and route). */
export const PAYMENT_OPERATION = 'POST /payments';

/** The operation a stored key is scoped to (`account|operation|key`, each of the first two URI-encoded). */
export function operationOf(storedKey: string): string {
  const [, operation = ''] = storedKey.split('|', 2);
  return decodeURIComponent(operation);
}

/**
 * One resolver per operation, for a completer that finds every recoverable operation on the store's one recovery
 * index: each goes to the resolver of its own operation. An operation nobody here knows is left due (retried, with
 * its name in the reason), never abandoned by a resolver that would look in the wrong place: the payments lookup
 * finds no charge under an order's key, as its charge is made under the order's step key.
 */
export function resolverByOperation<TEffect>(
  resolvers: Readonly<Record<string, RecoveryResolver<TEffect>>>,
): RecoveryResolver<TEffect> {
  return async function resolveByOperation(lease): Promise<RecoveryVerdict<TEffect>> {
    const operation = operationOf(lease.key);
    const resolve = resolvers[operation];
    if (!resolve) return { kind: 'retry', reason: `no recovery for operation ${JSON.stringify(operation)}` };
    return resolve(lease);
  };
}

/**
 * One completer run: every payment operation due for recovery, completed from its charge or abandoned; operations
 * of other kinds through their own resolvers (`others`, by operation).
 */
export function recoverPayments<TEffect>(
  deps: PaymentRecoveryDeps<TEffect> & { readonly processor: ProcessorClient },
  options: RecoverDueOptions = {},
  others: Readonly<Record<string, RecoveryResolver<TEffect>>> = {},
): Promise<RecoveryReport> {
  return recoverDue(deps.store, resolverByOperation({ ...others, [PAYMENT_OPERATION]: chargeLookup(deps) }), options);
}
