/**
 * The steps of an order, in the order they run, and what can become of each. Apart from the schemas (schema.ts) so
 * that code reading an order's steps, as the repositories do, loads no zod: the payments function carries the
 * repositories (its data on either store), and building the orders' schemas at its import cost it milliseconds of
 * every cold start.
 */
export const ORDER_STEPS = ['reserve', 'charge', 'ship', 'notify'] as const;
export type OrderStepName = (typeof ORDER_STEPS)[number];

/**
 * What became of a step, as GET /orders/{id} shows it:
 *
 * - `pending`: not done yet (its checkpoint has not committed);
 * - `completed`: done, with what it produced (`ref`);
 * - `released`: a reservation given back (the order ended without shipping);
 * - `refunded`: a charge given back (`ref`: the refund), the order refused after it;
 * - `refused`: the outside system refused the step for good (a declined card, a line the warehouse won't ship, an
 *   address the mailer won't take);
 * - `skipped`: the order ended before this step.
 */
export const STEP_STATES = ['pending', 'completed', 'released', 'refunded', 'refused', 'skipped'] as const;
export type StepState = (typeof STEP_STATES)[number];

/** An order's status (see the `Order` schema). */
export const ORDER_STATUSES = ['pending', 'confirmed', 'declined', 'refused'] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

/** The states a step's own checkpoint (or its compensation) writes; `pending` and `skipped` come from the order's end. */
export type MarkedStepState = Extract<StepState, 'completed' | 'released' | 'refunded' | 'refused'>;

/** The steps after `step`, in the order they would have run. */
export function stepsAfter(step: OrderStepName): OrderStepName[] {
  return ORDER_STEPS.slice(ORDER_STEPS.indexOf(step) + 1);
}
