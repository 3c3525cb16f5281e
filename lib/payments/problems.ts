import { BodyError, ProblemDetails, ProblemType } from 'keystone-idempotency/http';
import * as z from 'zod/mini';

/** The payments API's own problem types, from the one list of them (`ProblemType`). */
export const PaymentProblemType = {
  /** The processor declined the card: a stored, replayed answer (402). */
  cardDeclined: ProblemType.cardDeclined,
  /** The processor failed, timed out or was unreachable (502/503/504 + Retry-After): retry with the same key. */
  processorUnavailable: ProblemType.processorUnavailable,
  /**
   * The processor refused a value the client chose (an unknown card token, say): the client's mistake, told as such
   * (422, `errors` naming the field), stored and replayed like any other deterministic answer.
   */
  paymentRejected: ProblemType.paymentRejected,
} as const;

/** The `card-declined` problem carries the processor's decline code, for the client to show or switch on. */
export const CardDeclinedProblem = z.extend(ProblemDetails, { decline_code: z.string().check(z.minLength(1)) });
export type CardDeclinedProblem = z.infer<typeof CardDeclinedProblem>;

/** The `payment-rejected` problem lists the fields the processor refused, like `invalid-body` does ours. */
export const PaymentRejectedProblem = z.extend(ProblemDetails, { errors: z.array(BodyError).check(z.minLength(1)) });
export type PaymentRejectedProblem = z.infer<typeof PaymentRejectedProblem>;
