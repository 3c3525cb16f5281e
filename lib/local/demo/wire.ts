/**
 * What the demo's local-only routes send the page. Types only, shared by the server side (Node) and the page
 * (browser), so the two can't drift apart.
 */

/** `GET /demo/config`: who the page pays as. A demo account that only the local stack creates. */
export interface DemoConfig {
  readonly accountId: string;
  readonly apiKey: string;
}

/** A charge from the sandbox processor's ledger. */
export interface LedgerCharge {
  readonly id: string;
  readonly amount: number;
  readonly currency: string;
  /** The payment the charge was made for (the payments service writes it into the charge's metadata). */
  readonly payment_id: string | null;
  /** Unix seconds. */
  readonly created: number;
}

/** `GET /demo/charges`: the processor's charges for the demo account, oldest first. */
export interface DemoCharges {
  readonly accountId: string;
  readonly charges: readonly LedgerCharge[];
}

/** `POST /demo/hold`: the processor will hold the next charge this long before making it and answering. */
export interface DemoHold {
  readonly holdMs: number;
}
