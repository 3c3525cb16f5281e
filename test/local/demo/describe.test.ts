import { type Attempt, IdempotencyProblemType } from 'keystone-idempotency/client';
import { verdict } from '../../../lib/local/demo/page/describe';
import type { TapOutcome } from '../../../lib/local/demo/page/tap';
import type { PaymentResult } from '../../../lib/payments/client';

/**
 * The page's verdict is what a visitor reads about their tap. It must tell what happened, not the story the demo
 * usually shows: the processor's hold makes a 409 the rule, but a duplicate that arrives after the original finished
 * gets a replay with no 409, and the verdict says so.
 */
const charge = { id: 'ch_1', amount: 4200, currency: 'usd', payment_id: 'pay_1', created: 1 };
const payment = {
  id: 'pay_1',
  amount: 4200,
  currency: 'usd',
  source: 'tok_visa',
  description: null,
  status: 'succeeded' as const,
  charge_id: 'ch_1',
  created_at: '2026-12-01T00:00:00Z',
  settled_at: null,
};

function response(number: number, status: number, extra: Partial<Attempt & { kind: 'response' }> = {}): Attempt {
  return {
    number,
    waitedMs: number === 1 ? 0 : 1000,
    durationMs: 5,
    kind: 'response',
    status,
    replayed: false,
    retryAfter: null,
    problemType: null,
    ...extra,
  };
}

function success(attempts: Attempt[], replayed: boolean): PaymentResult {
  return {
    kind: 'success',
    status: 201,
    body: payment,
    headers: new Headers(),
    replayed,
    idempotencyKey: 'k',
    attempts,
  };
}

const oneKey = { oneKey: true, flaky: false };

describe('verdict', () => {
  it('tells the usual story when the duplicate was told 409 and then got the replay', () => {
    const outcome: TapOutcome = {
      heldMs: 1500,
      charges: [charge],
      results: [
        success([response(1, 201)], false),
        success(
          [
            response(1, 409, { retryAfter: '1', problemType: IdempotencyProblemType.requestInFlight }),
            response(2, 201, { replayed: true }),
          ],
          true,
        ),
      ],
    };
    expect(verdict(outcome, oneKey)).toBe(
      'Charged once. The duplicate was told 409 (in flight), waited, and got the answer replayed.',
    );
  });

  it('says the original had already finished when the duplicate got a replay without a 409', () => {
    const outcome: TapOutcome = {
      heldMs: 1500,
      charges: [charge],
      results: [success([response(1, 201)], false), success([response(1, 201, { replayed: true })], true)],
    };
    const said = verdict(outcome, oneKey);
    expect(said).toBe(
      'Charged once. The original had already finished when the duplicate arrived: it got the answer replayed at once.',
    );
    expect(said).not.toContain('409');
  });
});
