import type { Attempt } from 'keystone-idempotency/client';
import type { PaymentResult } from '../../../payments/client';
import { describeAttempt, describeResult, describeSeconds, describeWait } from './describe';
import type { TapListener, TapOutcome, TapRequest, TapSettings } from './tap';

/**
 * One tap's entry in the log: a line per request with each attempt as it ends (status, Retry-After, replay, the
 * client's wait before the next), then the charges the ledger gained. Built with DOM calls and textContent only:
 * nothing from the network is ever parsed as HTML.
 */
export class TapEntry implements TapListener {
  readonly #item: HTMLLIElement;
  readonly #attemptLists = new Map<string, HTMLOListElement>();

  constructor(log: HTMLOListElement, tap: number, settings: TapSettings) {
    this.#item = element('li', { className: 'tap' });
    this.#item.dataset.tap = String(tap);
    this.#item.setAttribute('aria-busy', 'true');
    const head = element('div', { className: 'tap-head' });
    head.append(
      element('strong', { text: `Tap ${tap}` }),
      element('span', { className: 'tag', text: settings.oneKey ? 'one key per payment' : 'a new key per request' }),
    );
    if (settings.flaky) head.append(element('span', { className: 'tag warn', text: 'flaky network' }));
    this.#item.append(head);
    log.prepend(this.#item);
  }

  started(requests: readonly TapRequest[], heldMs: number | null): void {
    if (heldMs !== null) {
      this.#item
        .querySelector('.tap-head')
        ?.append(element('span', { className: 'tag', text: `charge held ${describeSeconds(heldMs)}` }));
    }
    for (const request of requests) {
      const row = element('div', { className: 'request' });
      row.dataset.request = request.label;
      const attempts = element('ol', { className: 'attempts' });
      row.append(
        element('span', { className: 'who', text: request.label }),
        element('code', { className: 'key', text: `Idempotency-Key ${request.idempotencyKey}` }),
        attempts,
      );
      this.#attemptLists.set(request.label, attempts);
      this.#item.append(row);
    }
  }

  attempt(request: TapRequest, attempt: Attempt): void {
    const list = this.#attemptLists.get(request.label);
    if (!list) return;
    if (attempt.number > 1) list.append(element('li', { className: 'wait', text: describeWait(attempt.waitedMs) }));
    // Whether the client retries is known only later; until then a non-2xx shows as "will be retried".
    const { text, tone } = describeAttempt(attempt, true);
    list.append(element('li', { className: `attempt ${tone}`, text }));
  }

  finished(outcome: TapOutcome, requests: readonly TapRequest[]): void {
    outcome.results.forEach((result, index) => {
      const request = requests[index];
      if (request) this.#finishRequest(request, result);
    });
    const count = outcome.charges.length;
    const summary = element('span', {
      className: `tag ${count === 1 ? 'once' : 'more'}`,
      text: `${count} ${count === 1 ? 'charge' : 'charges'}`,
    });
    this.#item.querySelector('.tap-head')?.append(summary);
    const ledger =
      count === 0
        ? 'Ledger: no new charge.'
        : `Ledger: ${outcome.charges.map((charge) => `${charge.id} for ${charge.payment_id ?? '?'}`).join(', ')}`;
    this.#item.append(element('p', { className: 'ledger', text: ledger }));
    this.#item.setAttribute('aria-busy', 'false');
  }

  failed(error: unknown): void {
    this.#item.append(element('p', { className: 'ledger', text: `The tap failed: ${String(error)}` }));
    this.#item.setAttribute('aria-busy', 'false');
  }

  #finishRequest(request: TapRequest, result: PaymentResult): void {
    const list = this.#attemptLists.get(request.label);
    if (!list) return;
    // The last attempt was not retried after all: repaint it as final unless it succeeded.
    const last = list.lastElementChild;
    const lastAttempt = result.attempts.at(-1);
    if (last && lastAttempt) {
      const { text, tone } = describeAttempt(lastAttempt, false);
      last.className = `attempt ${tone}`;
      last.textContent = text;
    }
    list.append(element('li', { className: 'wait', text: describeResult(result) }));
  }
}

function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  options: { className?: string; text?: string } = {},
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (options.className) node.className = options.className;
  if (options.text !== undefined) node.textContent = options.text;
  return node;
}
