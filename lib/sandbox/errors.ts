import type { z } from 'zod';

/**
 * Errors the sandbox answers with. The sandbox impersonates an outside processor, so its error bodies use that
 * processor's envelope (`{ error: { type, code?, message } }`, Stripe's) rather than our own problem+json: clients
 * under test must parse exactly what they would parse in production.
 */

/** The `error.type` values, as Stripe names them. */
export const ErrorType = {
  invalidRequest: 'invalid_request_error',
  idempotency: 'idempotency_error',
  card: 'card_error',
  api: 'api_error',
} as const;
export type ErrorType = (typeof ErrorType)[keyof typeof ErrorType];

/** The JSON body of every error response. */
export interface ErrorBody {
  readonly error: {
    readonly type: ErrorType;
    readonly code?: string;
    readonly message: string;
    /** The request parameter at fault, as Stripe names it (`amount`, `source`, ...). */
    readonly param?: string;
  };
}

/** An error that maps onto one HTTP response; thrown by request parsing, rendered by the router. */
export class SandboxApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly type: ErrorType,
    message: string,
    readonly code?: string,
    readonly param?: string,
  ) {
    super(message);
    this.name = 'SandboxApiError';
  }

  /** The response body; only what the client is meant to see. */
  toBody(): ErrorBody {
    return {
      error: {
        type: this.type,
        ...(this.code ? { code: this.code } : {}),
        message: this.message,
        ...(this.param ? { param: this.param } : {}),
      },
    };
  }
}

/** A 400 for a request the sandbox cannot act on (bad JSON, a missing field, an unknown event). */
export function invalidRequest(message: string, statusCode = 400, code?: string): SandboxApiError {
  return new SandboxApiError(statusCode, ErrorType.invalidRequest, message, code);
}

/** The body of a 5xx: nothing about the cause leaks out. */
export function internalErrorBody(): ErrorBody {
  return { error: { type: ErrorType.api, message: 'An internal error occurred in the sandbox.' } };
}

/** A 400 for a body that failed its schema, listing every problem on one line (`amount: Too small…; source: …`). */
export function invalidBody(what: string, error: z.ZodError): SandboxApiError {
  const problems = error.issues.map((issue) =>
    issue.path.length > 0 ? `${issue.path.join('.')}: ${issue.message}` : issue.message,
  );
  // Like Stripe, name the first parameter at fault.
  const param = error.issues[0]?.path.map(String).join('.') || undefined;
  return new SandboxApiError(
    400,
    ErrorType.invalidRequest,
    `Invalid ${what}: ${problems.join('; ')}.`,
    undefined,
    param,
  );
}
