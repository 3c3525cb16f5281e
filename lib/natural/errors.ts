import { IdempotencyError } from '../engine/errors.js';

/**
 * Root of the natural-idempotency helpers' errors. The expected outcomes (created or exists, changed or unchanged
 * or missing) are values; these are for requests refused before anything is sent.
 */
export class NaturalIdempotencyError extends IdempotencyError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NaturalIdempotencyError';
  }
}

/** The request can't express what the helper promises (for example a key attribute among the values to set). */
export class InvalidNaturalRequestError extends NaturalIdempotencyError {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidNaturalRequestError';
  }
}
