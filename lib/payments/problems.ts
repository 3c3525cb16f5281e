import type * as http from 'keystone-idempotency/http';
import * as z from 'zod/mini';

export { type PaymentProblemSlug, PaymentProblemType, PROBLEM_TYPE_BASE } from './problem-types';

/**
 * The problem+json bodies the API answers, as zod schemas: the OpenAPI document is generated from them, and the
 * end-to-end tests check responses against it. The package defines these bodies as plain types (it answers them
 * without a schema library); each schema here is declared to produce exactly that type, so the two cannot drift.
 */
export const ProblemDetails = z.looseObject({
  type: z.string().check(z.minLength(1)),
  title: z.string(),
  status: z.number().check(z.int(), z.minimum(400), z.maximum(599)),
  detail: z.optional(z.string()),
}) satisfies z.ZodMiniType<http.ProblemDetails>;

export const BodyError = z.strictObject({
  path: z.string(),
  message: z.string(),
}) satisfies z.ZodMiniType<http.BodyError>;

export const InvalidBodyProblem = z.extend(ProblemDetails, {
  errors: z.array(BodyError).check(z.minLength(1)),
}) satisfies z.ZodMiniType<http.InvalidBodyProblem>;

export const GatewayProblem = z.strictObject({
  type: z.literal('about:blank'),
  title: z.nullable(z.string()),
  requestId: z.string().check(z.minLength(1)),
}) satisfies z.ZodMiniType<http.GatewayProblem>;

/** The `card-declined` problem carries the processor's decline code, for the client to show or switch on. */
export const CardDeclinedProblem = z.extend(ProblemDetails, { decline_code: z.string().check(z.minLength(1)) });
export type CardDeclinedProblem = z.infer<typeof CardDeclinedProblem>;

/** The `insufficient-stock` problem names each line the stock cannot cover, and what is left of it. */
export const InsufficientStockProblem = z.extend(ProblemDetails, {
  shortages: z
    .array(z.strictObject({ sku: z.string(), requested: z.number(), available: z.number() }))
    .check(z.minLength(1)),
});
export type InsufficientStockProblem = z.infer<typeof InsufficientStockProblem>;

/** The `payment-rejected` problem lists the fields the processor refused, like `invalid-body` does ours. */
export const PaymentRejectedProblem = z.extend(ProblemDetails, { errors: z.array(BodyError).check(z.minLength(1)) });
export type PaymentRejectedProblem = z.infer<typeof PaymentRejectedProblem>;
