import type { Inventory, Order, OrderLine, OrderWithSteps } from './schema';
import { ORDER_STEPS, type OrderStepName } from './steps';

/** A line the stock cannot cover: what was asked, and what is left. */
export interface Shortage {
  readonly sku: string;
  readonly requested: number;
  readonly available: number;
}

/** What the completion of an order sets on its row. */
export interface OrderOutcome {
  readonly status: 'confirmed' | 'declined';
  readonly charge_id: string | null;
  readonly shipment_id: string | null;
  readonly email_id: string | null;
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
  /** A step's checkpoint on the order's row: the step completed, with what it produced. */
  markStep(accountId: string, orderId: string, step: OrderStepName, ref: string | null): TEffect;
  /** The completion: the order's status and every step's result, on its row. */
  complete(accountId: string, orderId: string, outcome: OrderOutcome): TEffect;
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
export type StepStates = Partial<
  Record<OrderStepName, { readonly state: 'completed' | 'released'; readonly ref: string | null }>
>;

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
