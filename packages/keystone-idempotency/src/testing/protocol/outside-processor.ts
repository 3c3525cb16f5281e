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

/** Who made a step's outside call, as the model knows it (the outside system itself knows only the key). */
export interface StepCaller {
  readonly op: number;
  readonly generation: number;
  readonly step: string;
  /** The model's step in which the call was made. */
  readonly at: number;
  /** The lease it was made under. */
  readonly leaseToken: string;
  /** Whether its caller held the record in progress when its command began. */
  readonly holder: boolean;
  /** Whether the record (this generation's) held the step done when the command began. */
  readonly alreadyDone: boolean;
}

/** One request a step made to its outside system. */
export interface StepCall extends StepCaller {
  readonly key: string;
  /** The id it answered with. */
  readonly id: string;
  /** Whether this request made something new (false: it answered what an earlier request under the key made). */
  readonly made: boolean;
}

/**
 * The outside system of a step (a stock reservation, a shipment booking), in memory. One that `dedupes` answers a
 * request under a key it has seen with what it made the first time; one that does not makes something new for
 * every request (the step must look its outcome up by the key, sent as a reference, rather than call twice).
 * `calls` keeps every request, so a test tells a replayed answer from a second thing made.
 */
export class StepOutsideSystem {
  readonly calls: StepCall[] = [];
  readonly #byKey = new Map<string, string>();

  constructor(
    readonly prefix: string,
    readonly dedupes: boolean,
  ) {}

  call(key: string, caller: StepCaller): string {
    const existing = this.dedupes ? this.#byKey.get(key) : undefined;
    const id = existing ?? `${this.prefix}_${this.calls.filter((call) => call.made).length + 1}`;
    if (!this.#byKey.has(key)) this.#byKey.set(key, id);
    this.calls.push({ ...caller, key, id, made: existing === undefined });
    return id;
  }

  /** What a resolver asks: what was made under this key (the first thing), if anything. Only looks. */
  lookup(key: string): string | undefined {
    return this.#byKey.get(key);
  }
}
