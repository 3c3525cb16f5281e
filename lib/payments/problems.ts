import * as z from 'zod/mini';
import { BodyError, ProblemDetails } from '../http/problem';

/** The payments API's own problem types, beside the HTTP adapter's (`ProblemType`), by slug. */
export const PaymentProblemType = {
  /** The processor declined the card: a stored, replayed answer (402). */
  cardDeclined: 'card-declined',
  /** The processor failed, timed out or was unreachable (502/503/504 + Retry-After): retry with the same key. */
  processorUnavailable: 'processor-unavailable',
  /**
   * The processor refused a value the client chose (an unknown card token, say): the client's mistake, told as such
   * (422, `errors` naming the field), stored and replayed like any other deterministic answer.
   */
  paymentRejected: 'payment-rejected',
} as const;

/** The `card-declined` problem carries the processor's decline code, for the client to show or switch on. */
export const CardDeclinedProblem = z.extend(ProblemDetails, { decline_code: z.string().check(z.minLength(1)) });
export type CardDeclinedProblem = z.infer<typeof CardDeclinedProblem>;

/** The `payment-rejected` problem lists the fields the processor refused, like `invalid-body` does ours. */
export const PaymentRejectedProblem = z.extend(ProblemDetails, { errors: z.array(BodyError).check(z.minLength(1)) });
export type PaymentRejectedProblem = z.infer<typeof PaymentRejectedProblem>;
