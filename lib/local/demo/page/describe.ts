import { type Attempt, IdempotencyProblemType } from 'keystone-idempotency/client';
import { PaymentProblemType, type PaymentResult } from '../../../payments/client';
import type { TapOutcome, TapSettings } from './tap';

/** Words for what the client and the server did: the log's and the verdict's text. No DOM here. */

export type Tone = 'ok' | 'retry' | 'final';

/** One attempt as a short phrase, and how it should look: success, retried, or a final failure. */
export function describeAttempt(attempt: Attempt, willRetry: boolean): { text: string; tone: Tone } {
  if (attempt.kind === 'error') {
    return { text: `no answer (${attempt.error})`, tone: willRetry ? 'retry' : 'final' };
  }
  const parts = [String(attempt.status), statusWords(attempt)];
  if (attempt.replayed) parts.push('· Idempotent-Replayed: true');
  if (attempt.retryAfter !== null) parts.push(`· Retry-After ${attempt.retryAfter} s`);
  const tone: Tone = attempt.status < 300 ? 'ok' : willRetry ? 'retry' : 'final';
  return { text: parts.join(' '), tone };
}

function statusWords(attempt: Attempt & { kind: 'response' }): string {
  if (attempt.status === 201) return attempt.replayed ? 'replayed' : 'created';
  switch (attempt.problemType) {
    case IdempotencyProblemType.requestInFlight:
      return 'in flight';
    case PaymentProblemType.processorUnavailable:
      return 'processor reply lost';
    case PaymentProblemType.cardDeclined:
      return 'declined';
    default:
      return '';
  }
}

/** The wait before a retry, as the log shows it between two attempts. */
export function describeWait(waitedMs: number): string {
  return `↻ retried after ${describeSeconds(waitedMs)}`;
}

/** Milliseconds as seconds, to a tenth: `1.5 s`. */
export function describeSeconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** How a request ended, in a few words. */
export function describeResult(result: PaymentResult): string {
  switch (result.kind) {
    case 'success':
      return `→ ${result.body.id}`;
    case 'problem':
      return `→ ${result.status} ${result.problem.title}`;
    case 'retry-later':
      return `→ ${result.status}, come back at ${new Date(result.retryAt).toLocaleTimeString()}`;
    case 'invalid-response':
      return `→ ${result.status} with an unreadable body (${result.reason})`;
    case 'no-answer':
      return `→ gave up (${result.reason})`;
  }
}

/** What one tap did to the card, judged from the processor's ledger, and why. */
export function verdict(outcome: TapOutcome, settings: TapSettings): string {
  const count = outcome.charges.length;
  const responses = outcome.results.flatMap((result) =>
    result.attempts.filter((attempt) => attempt.kind === 'response'),
  );
  const statuses = responses.map((attempt) => attempt.status);
  if (count === 0) return 'Nothing was charged.';
  if (count > 1) {
    return settings.oneKey
      ? `Charged ${count} times for one payment.`
      : `Charged ${count} times for one payment: each request had its own key, so the server saw ${count} payments.`;
  }
  const reasons = ['Charged once.'];
  if (statuses.includes(502)) {
    reasons.push(
      "The processor's reply was lost (502); the retry, under the same key, got back the charge it had made.",
    );
  }
  if (statuses.includes(409)) {
    reasons.push('The duplicate was told 409 (in flight), waited, and got the answer replayed.');
  } else if (responses.some((attempt) => attempt.replayed)) {
    // The processor's hold makes this rare, but it is what happened when it does: say so, not the usual story.
    reasons.push('The original had already finished when the duplicate arrived: it got the answer replayed at once.');
  }
  return reasons.join(' ');
}
