import type { RecoveryResolver, RecoveryVerdict, StoredResponse } from 'keystone-idempotency/engine';
import { type CreateOrderDeps, placeOrder, type Reservation, storedAnswer } from './create-order';

/** The operation `POST /orders` claims its keys under (the HTTP adapter's method and route). */
export const ORDER_OPERATION = 'POST /orders';

/**
 * The completer's answer for an order whose client never came back: drive it forward from its last recovery point,
 * with the very steps the handler runs. Steps done come back from the record without running; the booking, if it was
 * started, is looked up by the order's id before anything is booked (and not booked while one sent earlier may still
 * land); the rest run under their step keys, so the processor and the mailer dedupe whatever the lost attempt already
 * sent them. An order the warehouse refused is compensated (refund, stock back) and its 422 stored, by the engine.
 *
 * The reservation's checkpoint carries the order's request, so the record alone says what to do. No reservation done
 * means nothing happened (the reservation is the first step, and commits with its checkpoint): the order is given
 * up, and a late retry of the same request takes it over. An outside system that does not answer, or a booking whose
 * outcome can't be known yet, leaves the order due for a later run, never stored as a 5xx.
 */
export function orderRecovery<TEffect>(deps: CreateOrderDeps<TEffect>): RecoveryResolver<TEffect> {
  return async function driveOrderForward(lease): Promise<RecoveryVerdict<TEffect>> {
    const reserve = lease.progress?.steps.find((step) => step.name === 'reserve' && step.state === 'done');
    if (!reserve) return { kind: 'abandon' };
    const { request } = reserve.result as unknown as Reservation;
    const accountId = accountOf(lease.key);
    return {
      kind: 'continue',
      work: async (handle): Promise<StoredResponse> =>
        storedAnswer(await placeOrder(deps, { accountId, body: request, idempotency: handle })),
    };
  };
}

/** The account a stored key is scoped to (its first, URI-encoded part). */
function accountOf(storedKey: string): string {
  return decodeURIComponent(storedKey.split('|', 1)[0] ?? '');
}
