import { z } from 'zod';
import { invalidBody } from './errors';
import { newId } from './ids';

/**
 * The sandbox warehouse: books shipments like many real shipping APIs do, with **no** idempotency key. Every
 * `POST /v1/shipments` books a new shipment, whatever `Idempotency-Key` it carries; a client that lost an answer can
 * only ask which shipments were booked for its reference (`GET /v1/shipments?reference=R`) before booking again.
 */

/** The longest reference the warehouse keeps (an order id fits many times over). */
const MAX_REFERENCE_LENGTH = 255;

/** The most units of one SKU a booking's line may hold: a line above it is refused (400), whatever the stock. */
export const WAREHOUSE_MAX_LINE_QUANTITY = 1_000_000;

const shipmentRequestSchema = z.strictObject({
  reference: z.string().min(1).max(MAX_REFERENCE_LENGTH),
  items: z
    .array(
      z.strictObject({
        sku: z.string().min(1).max(64),
        quantity: z
          .number()
          .int()
          .min(1)
          .max(WAREHOUSE_MAX_LINE_QUANTITY, `a line holds at most ${WAREHOUSE_MAX_LINE_QUANTITY} units`),
      }),
    )
    .min(1)
    .max(100),
});

/** A validated `POST /v1/shipments` body. */
export type ShipmentRequest = z.infer<typeof shipmentRequestSchema>;

/** A shipment the warehouse booked: the witness that something will be sent. */
export interface Shipment {
  readonly id: string;
  readonly object: 'shipment';
  /** The merchant's reference (our order id): the only way to find a booking again. */
  readonly reference: string;
  readonly items: readonly { readonly sku: string; readonly quantity: number }[];
  readonly status: 'booked';
  /** Unix seconds. */
  readonly created: number;
}

/** Validates a shipment request body (already parsed from JSON). */
export function parseShipmentRequest(body: unknown): ShipmentRequest {
  const parsed = shipmentRequestSchema.safeParse(body);
  if (!parsed.success) throw invalidBody('shipment', parsed.error);
  return parsed.data;
}

/**
 * The references whose booking the warehouse has received and not finished making: its lookup can't say yet whether
 * they are booked, and answers so (409) rather than "none", which a client would take as final.
 */
export class BookingsInProgress {
  readonly #running = new Map<string, number>();

  /** A booking for `reference` has arrived; the function returned marks it finished (calling it again does nothing). */
  begin(reference: string): () => void {
    this.#running.set(reference, (this.#running.get(reference) ?? 0) + 1);
    let finished = false;
    return () => {
      if (finished) return;
      finished = true;
      const left = (this.#running.get(reference) ?? 1) - 1;
      if (left > 0) this.#running.set(reference, left);
      else this.#running.delete(reference);
    };
  }

  has(reference: string): boolean {
    return this.#running.has(reference);
  }
}

/** The shipment a request books. */
export function buildShipment(request: ShipmentRequest, createdSeconds: number): Shipment {
  return {
    id: newId('shp'),
    object: 'shipment',
    reference: request.reference,
    items: request.items,
    status: 'booked',
    created: createdSeconds,
  };
}
