/** A charge the outside system made: the effect an owner's work has outside our tables. */
export interface Charge {
  readonly id: string;
  /** The idempotency key it was made under: the downstream key of the lease that asked for it. */
  readonly downstreamKey: string;
}

/**
 * The outside system of the protocol model (a payment processor), in memory and keyed like a real one (and like
 * lib/sandbox): a request under a key it has seen answers with the charge made the first time, it never charges
 * twice under one key. `made` keeps every charge actually made, so a test tells one charge replayed from two charges
 * made under two keys for one operation.
 */
export class OutsideProcessor {
  readonly #byKey = new Map<string, Charge>();
  readonly made: Charge[] = [];

  charge(downstreamKey: string): Charge {
    const existing = this.#byKey.get(downstreamKey);
    if (existing) return existing;
    const charge: Charge = { id: `ch_${this.made.length + 1}`, downstreamKey };
    this.#byKey.set(downstreamKey, charge);
    this.made.push(charge);
    return charge;
  }

  /** What recovery asks: the charge made under this key, if any. Only looks; never charges. */
  lookup(downstreamKey: string): Charge | undefined {
    return this.#byKey.get(downstreamKey);
  }
}
