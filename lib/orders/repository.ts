import type { Inventory, Order, OrderLine, OrderWithSteps } from './schema';
import { type MarkedStepState, ORDER_STEPS, type OrderStepName, type StepState, stepsAfter } from './steps';

/** A line the stock cannot cover: what was asked, and what is left. */
export interface Shortage {
  readonly sku: string;
  readonly requested: number;
  readonly available: number;
}

/**
 * What the completion of an order sets on its row. Confirmed with no `email_id`: the mailer refused the confirmation,
 * and the order stands (paid and shipped), its `notify` step `refused`. Declined: the processor refused the card.
 */
export type OrderOutcome =
  | {
      readonly status: 'confirmed';
      readonly charge_id: string;
      readonly shipment_id: string;
      readonly email_id: string | null;
    }
  | { readonly status: 'declined'; readonly charge_id: null; readonly shipment_id: null; readonly email_id: null };

/**
 * The end of an order refused after its charge: the step an outside system refused for good, and what was done
 * before it (the charge refunded and the reservation released by then, each marked by its own compensation).
 */
export interface OrderRefusal {
  readonly step: OrderStepName;
  readonly charge_id: string | null;
  readonly shipment_id: string | null;
}

/**
 * Where orders, their reservations and the stock live, in the terms of the idempotency store they commit with (as
 * {@link PaymentsRepository}): each write is an effect of that store, staged in the step (or the completion) it
 * belongs to, so it commits with that step's checkpoint or not at all. Reads go straight to the database.
 *
 * [PaymentsRepository]: ../payments/store.ts
 */
export interface OrdersRepository<TEffect> {
  /**
   * The reservation step's writes: the order's row (pending, its reservation done), its reservation, and each line's
   * units moved from available to reserved. Fails the commit when the order already has a reservation or a line's
   * stock no longer covers it (another order took it between the check and the commit).
   */
  reserve(accountId: string, order: Order, operationKey: string): TEffect[];
  /**
   * A step's state on the order's row: `completed` (the default) with what it produced, from the step's checkpoint;
   * `refunded` (with the refund's id) or `released`, from a compensation; `refused`, a step refused for good.
   */
  markStep(
    accountId: string,
    orderId: string,
    step: OrderStepName,
    ref: string | null,
    state?: MarkedStepState,
  ): TEffect;
  /**
   * The completion of a confirmed or declined order: its status and every step's state (a declined order: `reserve`
   * released, `charge` refused, `ship` and `notify` skipped). Fails the commit unless the order is pending.
   */
  complete(accountId: string, orderId: string, outcome: OrderOutcome): TEffect;
  /**
   * The end of an order refused after its charge: status `refused`, the refused step `refused`, every step after it
   * `skipped`; the steps before it keep what their compensations marked (`refunded`, `released`). Fails the commit
   * unless the order is pending.
   */
  refuse(accountId: string, orderId: string, refusal: OrderRefusal): TEffect;
  /** Gives a reservation back (a declined card): reserved units to available again, once; the commit fails on a repeat. */
  release(accountId: string, orderId: string, items: readonly OrderLine[]): TEffect[];
  /** The lines the stock cannot cover now (a check before the reservation: the commit's condition is the guarantee). */
  shortages(items: readonly OrderLine[]): Promise<Shortage[]>;
  getOrder(accountId: string, orderId: string): Promise<OrderWithSteps | undefined>;
  getInventory(sku: string): Promise<Inventory | undefined>;
  /** Puts stock for a SKU that has none yet (the local stack seeds with it); an existing SKU is left alone. */
  seedStock(sku: string, units: number): Promise<void>;
}

/** The state of each step on a row, by name: the row's own form (a map on DynamoDB, jsonb on PostgreSQL). */
export type StepStates = Partial<Record<OrderStepName, StepOnRow>>;
type StepOnRow = { readonly state: Exclude<StepState, 'pending'>; readonly ref: string | null };

/** Every step's state at an order's completion (confirmed or declined). */
export function completedSteps(outcome: OrderOutcome): StepStates {
  if (outcome.status === 'confirmed') {
    return {
      reserve: { state: 'completed', ref: null },
      charge: { state: 'completed', ref: outcome.charge_id },
      ship: { state: 'completed', ref: outcome.shipment_id },
      notify:
        outcome.email_id === null ? { state: 'refused', ref: null } : { state: 'completed', ref: outcome.email_id },
    };
  }
  return {
    reserve: { state: 'released', ref: null },
    charge: { state: 'refused', ref: null },
    ship: { state: 'skipped', ref: null },
    notify: { state: 'skipped', ref: null },
  };
}

/** The states a refusal sets: the refused step's, and `skipped` for every step after it. */
export function refusedSteps(step: OrderStepName): StepStates {
  return Object.fromEntries([
    [step, { state: 'refused', ref: null }],
    ...stepsAfter(step).map((later) => [later, { state: 'skipped', ref: null }]),
  ]) as StepStates;
}

/**
 * A row as the API shows it, from either store (a DynamoDB item, a PostgreSQL row: no driver here, so a function
 * bundled for one store carries nothing of the other), each step in the order it runs (one not checkpointed yet is
 * pending).
 */
export function toOrder(item: Record<string, unknown>): OrderWithSteps {
  const steps = (item.steps ?? {}) as StepStates;
  return {
    id: item.id as string,
    status: item.status as Order['status'],
    items: item.items as OrderLine[],
    amount: Number(item.amount),
    currency: item.currency as string,
    email: item.email as string,
    charge_id: (item.charge_id as string | null | undefined) ?? null,
    shipment_id: (item.shipment_id as string | null | undefined) ?? null,
    email_id: (item.email_id as string | null | undefined) ?? null,
    created_at: item.created_at instanceof Date ? item.created_at.toISOString() : (item.created_at as string),
    steps: ORDER_STEPS.map((name) => ({ name, state: steps[name]?.state ?? 'pending', ref: steps[name]?.ref ?? null })),
  };
}
