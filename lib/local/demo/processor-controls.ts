import type { Charge } from '../../sandbox/processor';
import type { LedgerCharge } from './wire';

/**
 * What the demo page needs from the sandbox processor, which listens on another port (so another origin: the page
 * can't call it itself): its ledger, read for one account, and its fault switch.
 */

/** The processor could not be asked: not running, or not a sandbox (`PROCESSOR_URL` names something else). */
export class ProcessorControlError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ProcessorControlError';
  }
}

export class ProcessorControls {
  constructor(private readonly processorUrl: string) {}

  /**
   * The charges the processor made for `accountId`, in the order it made them: the witness of what happened,
   * whatever the page or the client believe.
   */
  async chargesOf(accountId: string): Promise<LedgerCharge[]> {
    const charges = (await this.call('GET', '/charges')) as Charge[];
    return charges
      .filter((charge) => charge.metadata.account_id === accountId)
      .map((charge) => ({
        id: charge.id,
        amount: charge.amount,
        currency: charge.currency,
        payment_id: charge.metadata.payment_id ?? null,
        created: charge.created,
      }));
  }

  /**
   * Arms one `drop_after_charge`: the next charge is made, then the processor hangs up without answering, as a
   * flaky network loses a reply. The payments API sees a dropped connection and answers 502 + Retry-After.
   */
  async loseNextReply(): Promise<void> {
    await this.call('POST', '/__faults', { mode: 'drop_after_charge', count: 1 });
  }

  /**
   * Arms one `delay`: the processor's next charge waits `ms` before it is made and answered. The demo holds the
   * original of a one-key double tap this way, so that its duplicate always arrives while the original is running,
   * however fast the machine (a real processor takes about as long).
   */
  async holdNextCharge(ms: number): Promise<void> {
    await this.call('POST', '/__faults', { mode: 'delay', ms, count: 1 });
  }

  /** Disarms every pending fault (the sandbox has one fault queue for all its callers). */
  async clearFaults(): Promise<void> {
    await this.call('DELETE', '/__faults');
  }

  private async call(method: string, path: string, body?: unknown): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(new URL(path, this.processorUrl), {
        method,
        headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(5000),
      });
    } catch (error) {
      throw new ProcessorControlError(`the sandbox processor at ${this.processorUrl} did not answer`, { cause: error });
    }
    if (!response.ok) {
      await response.body?.cancel();
      throw new ProcessorControlError(`the sandbox processor answered ${method} ${path} with ${response.status}`);
    }
    return response.json();
  }
}
