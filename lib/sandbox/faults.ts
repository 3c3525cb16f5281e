import { z } from 'zod';
import { invalidBody } from './errors';

/**
 * Injected faults: the failures a real processor produces at random, on demand and in order. A fault applies to
 * the request that would do the work (the first one with a given key); replays are served from the processor's
 * idempotency memory and never consume one, so a fault always lands on an attempt to charge (or to send).
 */

/**
 * Which endpoint family a fault targets: the processor's charges and refunds, the mailer's emails, the warehouse's
 * shipments.
 */
export const FaultTarget = {
  charges: 'charges',
  refunds: 'refunds',
  emails: 'emails',
  shipments: 'shipments',
} as const;
export type FaultTarget = (typeof FaultTarget)[keyof typeof FaultTarget];

/** The longest injectable delay: long enough for any timeout test, short enough not to hang a run. */
const MAX_DELAY_MS = 120_000;
const MAX_COUNT = 1000;

const common = {
  count: z.number().int().min(1).max(MAX_COUNT).default(1),
  target: z
    .enum([FaultTarget.charges, FaultTarget.refunds, FaultTarget.emails, FaultTarget.shipments])
    .default(FaultTarget.charges),
};

const faultSchema = z.discriminatedUnion('mode', [
  /** Wait `ms` before doing the work; the work is done after the wait even if the client has hung up. */
  z.strictObject({ mode: z.literal('delay'), ms: z.number().int().min(0).max(MAX_DELAY_MS), ...common }),
  /** Answer 503 without doing the work, as an overloaded front door would. */
  z.strictObject({ mode: z.literal('error_503'), ...common }),
  /**
   * Refuse the request for good, doing nothing: a 400 (`refused`), as a warehouse answers a line it will not ship or a
   * processor a refund it will not make. Sending it again changes nothing but the fault's count.
   */
  z.strictObject({ mode: z.literal('refuse'), ...common }),
  /** Do the work, then destroy the socket without answering: the client cannot tell whether it happened. */
  z.strictObject({ mode: z.literal('drop_after_charge'), ...common }),
  /**
   * Do the work (and emit its event), then wait `ms` before answering: the event reaches the merchant before the
   * answer does, as happens when a processor's response is slow.
   */
  z.strictObject({ mode: z.literal('delay_after_charge'), ms: z.number().int().min(0).max(MAX_DELAY_MS), ...common }),
  /**
   * Held `ms` on the way, before the warehouse receives it at all (a slow network, a queue in front of it): its lookup
   * knows nothing of the booking meanwhile, then it books, whether the client is still waiting or not. Shipments only:
   * the processor and the mailer dedupe by key, and the warehouse is where absence can be concluded too early.
   */
  z.strictObject({
    mode: z.literal('in_transit'),
    ms: z.number().int().min(0).max(MAX_DELAY_MS),
    count: common.count,
    target: z.literal(FaultTarget.shipments, {
      error: 'in_transit holds bookings on their way: its target is shipments',
    }),
  }),
  /**
   * Down for a while: answer 503, doing nothing, to every request of the target for `ms` from when the fault is
   * added, however many there are; then it is gone. What "the mailer is down for a few seconds" looks like to a
   * client that retries, where `error_503` with a count is "the next N requests fail".
   */
  z.strictObject({
    mode: z.literal('outage'),
    ms: z.number().int().min(1).max(MAX_DELAY_MS),
    target: common.target,
  }),
]);

/** A fault as requested through `POST /__faults`, with its defaults applied. */
export type FaultSpec = z.infer<typeof faultSchema>;

/** The fault one request draws: the spec without its bookkeeping. */
export type Fault =
  | { readonly mode: 'delay'; readonly ms: number }
  | { readonly mode: 'error_503' }
  | { readonly mode: 'refuse' }
  | { readonly mode: 'drop_after_charge' }
  | { readonly mode: 'delay_after_charge'; readonly ms: number }
  | { readonly mode: 'in_transit'; readonly ms: number };

/** A pending fault and how many more requests it will hit (an outage: how many more milliseconds it lasts). */
export type PendingFault =
  | (Exclude<FaultSpec, { mode: 'outage' }> & { readonly remaining: number })
  | (Extract<FaultSpec, { mode: 'outage' }> & { readonly remaining_ms: number });

/** Validates a `POST /__faults` body; anything else is a 400 that says what was wrong. */
export function parseFault(body: unknown): FaultSpec {
  const parsed = faultSchema.safeParse(body);
  if (!parsed.success) throw invalidBody('fault', parsed.error);
  return parsed.data;
}

type Pending =
  | { readonly spec: Exclude<FaultSpec, { mode: 'outage' }>; remaining: number }
  | { readonly spec: Extract<FaultSpec, { mode: 'outage' }>; readonly until: number };

/**
 * The queue of pending faults: first in, first drawn, each for `count` requests of its target; an outage answers
 * every request of its target until its time is up.
 */
export class FaultQueue {
  #pending: Pending[] = [];

  /** @param clock epoch milliseconds, for outages (`Date.now` by default). */
  constructor(private readonly clock: () => number = Date.now) {}

  add(spec: FaultSpec): void {
    if (spec.mode === 'outage') this.#pending.push({ spec, until: this.clock() + spec.ms });
    else this.#pending.push({ spec, remaining: spec.count });
  }

  /** Draws the next fault for `target`, if any, and uses up one of its requests. */
  take(target: FaultTarget): Fault | undefined {
    this.#forgetEndedOutages();
    const index = this.#pending.findIndex((pending) => pending.spec.target === target);
    const pending = this.#pending[index];
    if (!pending) return undefined;
    if ('until' in pending) return { mode: 'error_503' };
    pending.remaining -= 1;
    if (pending.remaining === 0) this.#pending.splice(index, 1);
    return toFault(pending.spec);
  }

  list(): PendingFault[] {
    this.#forgetEndedOutages();
    const now = this.clock();
    return this.#pending.map((pending) =>
      'until' in pending
        ? { ...pending.spec, remaining_ms: pending.until - now }
        : { ...pending.spec, remaining: pending.remaining },
    );
  }

  #forgetEndedOutages(): void {
    const now = this.clock();
    this.#pending = this.#pending.filter((pending) => !('until' in pending) || pending.until > now);
  }

  clear(): void {
    this.#pending = [];
  }
}

function toFault(spec: Exclude<FaultSpec, { mode: 'outage' }>): Fault {
  switch (spec.mode) {
    case 'delay':
    case 'delay_after_charge':
    case 'in_transit':
      return { mode: spec.mode, ms: spec.ms };
    default:
      return { mode: spec.mode };
  }
}
