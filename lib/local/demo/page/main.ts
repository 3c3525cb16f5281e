import { type NewPayment, PaymentsClient } from '../../../payments/client';
import { demoApi } from './demo-api';
import { verdict } from './describe';
import { TapEntry } from './log-view';
import { doubleTap, type TapSettings } from './tap';

/**
 * The double-tap demo: wires the page's controls to the payments client (lib/payments/client, on the library's
 * retry-safe client in packages/keystone-idempotency/src/client, both bundled as they are) and to the local stack's demo routes. The charge counter only ever shows what the processor's ledger says.
 */
const PAYMENT: NewPayment = { amount: 4200, currency: 'usd', source: 'tok_visa', description: 'Double-tap demo' };

function byId<T extends HTMLElement>(id: string): T {
  const node = document.getElementById(id);
  if (!node) throw new Error(`the page has no #${id}`);
  return node as T;
}

const ui = {
  pay: byId<HTMLButtonElement>('pay'),
  reset: byId<HTMLButtonElement>('reset'),
  oneKey: byId<HTMLInputElement>('one-key'),
  flaky: byId<HTMLInputElement>('flaky'),
  account: byId<HTMLElement>('account'),
  count: byId<HTMLOutputElement>('charge-count'),
  verdict: byId<HTMLElement>('verdict'),
  sinceReset: byId<HTMLElement>('since-reset'),
  log: byId<HTMLOListElement>('log'),
  logEmpty: byId<HTMLElement>('log-empty'),
  failure: byId<HTMLElement>('failure'),
};

/** Charges already in the ledger at the last reset: "since reset" counts the ones after them. */
let chargesAtReset = new Set<string>();
let taps = 0;

function setBusy(busy: boolean): void {
  for (const control of [ui.pay, ui.reset, ui.oneKey, ui.flaky]) control.disabled = busy;
}

function showFailure(error: unknown): void {
  ui.failure.textContent = `Something went wrong: ${error instanceof Error ? error.message : String(error)}`;
  ui.failure.hidden = false;
}

async function showSinceReset(): Promise<void> {
  const { charges } = await demoApi.charges();
  const count = charges.filter((charge) => !chargesAtReset.has(charge.id)).length;
  ui.sinceReset.textContent = `${count} ${count === 1 ? 'charge' : 'charges'} for ${taps} ${taps === 1 ? 'tap' : 'taps'} since reset.`;
}

async function tap(client: PaymentsClient): Promise<void> {
  const settings: TapSettings = { oneKey: ui.oneKey.checked, flaky: ui.flaky.checked };
  taps += 1;
  const entry = new TapEntry(ui.log, taps, settings);
  ui.logEmpty.hidden = true;
  ui.count.value = '…';
  ui.count.removeAttribute('data-verdict');
  ui.verdict.textContent = 'Two requests in flight…';
  let requests: Parameters<TapEntry['finished']>[1] = [];
  try {
    const outcome = await doubleTap(client, demoApi, PAYMENT, settings, {
      started: (started, heldMs) => {
        requests = started;
        entry.started(started, heldMs);
      },
      attempt: (request, attempt) => entry.attempt(request, attempt),
    });
    entry.finished(outcome, requests);
    const count = outcome.charges.length;
    ui.count.value = String(count);
    ui.count.dataset.verdict = count === 1 ? 'once' : count > 1 ? 'more' : 'none';
    ui.verdict.textContent = verdict(outcome, settings);
    await showSinceReset();
  } catch (error) {
    entry.failed(error);
    ui.count.value = '?';
    ui.verdict.textContent = 'The tap failed: see the log.';
  }
}

async function reset(): Promise<void> {
  await demoApi.clearFaults();
  chargesAtReset = new Set((await demoApi.charges()).charges.map((charge) => charge.id));
  taps = 0;
  ui.log.replaceChildren();
  ui.logEmpty.hidden = false;
  ui.count.value = '–';
  ui.count.removeAttribute('data-verdict');
  ui.verdict.textContent = 'Tap Pay to start.';
  await showSinceReset();
}

async function start(): Promise<void> {
  const config = await demoApi.config();
  ui.account.textContent = config.accountId;
  const client = new PaymentsClient({ baseUrl: window.location.origin, apiKey: config.apiKey });
  chargesAtReset = new Set((await demoApi.charges()).charges.map((charge) => charge.id));
  await showSinceReset();
  const run = (action: () => Promise<void>) => () => {
    setBusy(true);
    action()
      .catch(showFailure)
      .finally(() => setBusy(false));
  };
  ui.pay.addEventListener(
    'click',
    run(() => tap(client)),
  );
  ui.reset.addEventListener('click', run(reset));
  setBusy(false);
}

start().catch(showFailure);
