import type { OrdersRepository } from './repository';

/**
 * The stock the local stack starts with, per SKU: enough that no test or demo runs out (a SKU already there keeps
 * what it has, so a restart on the same tables does not refill it).
 */
export const SEEDED_STOCK: Readonly<Record<string, number>> = { sku_widget: 500_000, sku_gadget: 500_000 };

export async function seedStock(orders: Pick<OrdersRepository<unknown>, 'seedStock'>): Promise<void> {
  for (const [sku, units] of Object.entries(SEEDED_STOCK)) await orders.seedStock(sku, units);
}
