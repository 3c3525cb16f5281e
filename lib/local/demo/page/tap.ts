import type { Attempt } from 'keystone-idempotency/client';
import type { NewPayment, PaymentResult, PaymentsClient } from '../../../payments/client';
import type { LedgerCharge } from '../wire';
import type { DemoApi } from './demo-api';

/** One tap's settings, as the switches stood when it was made. */
export interface TapSettings {
  /** One key for both requests (the right way), or a new key per request (the mistake). */
  readonly oneKey: boolean;
  /** Lose the processor's reply to the tap's first charge. */
  readonly flaky: boolean;
}

export interface TapRequest {
  readonly label: 'A' | 'B';
  readonly idempotencyKey: string;
}

export interface TapOutcome {
  readonly results: readonly PaymentResult[];
  /** How long the processor held the tap's first charge (a one-key tap on a steady network), or null. */
  readonly heldMs: number | null;
  /** The charges the processor's ledger gained during the tap: the witness, not the page's own count. */
  readonly charges: readonly LedgerCharge[];
}

export interface TapListener {
  started(requests: readonly TapRequest[], heldMs: number | null): void;
  attempt(request: TapRequest, attempt: Attempt): void;
}

/**
 * A double tap: two POSTs of one payment fired in the same instant, both through the retry-safe client. With
 * `oneKey` both are sends of one prepared operation (one key); without it, each request prepares its own, which is
 * what a client does when it makes the key per request instead of per payment.
 *
 * "The same instant" is two fetches a few milliseconds apart, and a local charge takes a few milliseconds too: on
 * its own the original could finish before its duplicate reaches the API, and the page would show a replay with no
 * 409 (on a quiet machine, now and then). So a one-key tap on a steady network first asks the processor to hold
 * the next charge: whichever request claims the key runs while the other arrives, every time. On a flaky network
 * the lost reply is the fault under test, and the two are not combined.
 */
export async function doubleTap(
  client: PaymentsClient,
  api: DemoApi,
  payment: NewPayment,
  settings: TapSettings,
  listener: TapListener,
): Promise<TapOutcome> {
  const before = new Set((await api.charges()).charges.map((charge) => charge.id));
  let heldMs: number | null = null;
  if (settings.flaky) await api.loseNextReply();
  else if (settings.oneKey) heldMs = (await api.holdNextCharge()).holdMs;
  const first = client.preparePayment(payment);
  const operations = [first, settings.oneKey ? first : client.preparePayment(payment)];
  const requests = operations.map(
    (operation, index): TapRequest => ({ label: index === 0 ? 'A' : 'B', idempotencyKey: operation.idempotencyKey }),
  );
  listener.started(requests, heldMs);
  const results = await Promise.all(
    operations.map((operation, index) => {
      const request = requests[index] as TapRequest;
      return operation.send({ onAttempt: (attempt) => listener.attempt(request, attempt) });
    }),
  );
  const charges = (await api.charges()).charges.filter((charge) => !before.has(charge.id));
  return { results, heldMs, charges };
}
