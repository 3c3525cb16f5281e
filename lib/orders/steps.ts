/**
 * The steps of an order, in the order they run. Apart from the schemas (schema.ts) so that code reading an order's
 * steps, as the repositories do, loads no zod: the payments function carries the repositories (its data on either
 * store), and building the orders' schemas at its import cost it milliseconds of every cold start.
 */
export const ORDER_STEPS = ['reserve', 'charge', 'ship', 'notify'] as const;
export type OrderStepName = (typeof ORDER_STEPS)[number];
