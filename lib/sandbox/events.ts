import type { Charge } from './charges';
import { newId } from './ids';

/**
 * An event the processor emits and delivers to the webhook endpoint. Named `ProcessorEvent` rather than `Event`
 * so that it never shadows the DOM-style `Event` class that Node declares globally.
 */
export interface ProcessorEvent {
  readonly id: string;
  readonly object: 'event';
  readonly type: 'charge.succeeded';
  /** Unix seconds. */
  readonly created: number;
  readonly data: { readonly object: Charge };
}

/** The event for a new successful charge (a replayed charge emits nothing: it is not new). */
export function chargeSucceeded(charge: Charge, createdSeconds: number): ProcessorEvent {
  return {
    id: newId('evt'),
    object: 'event',
    type: 'charge.succeeded',
    created: createdSeconds,
    data: { object: charge },
  };
}
