/**
 * What the client hands back. Expected outcomes are values, not exceptions: a refusal, a key reused with another
 * body, a dependency that stayed down, a deadline that passed, an answer that made no sense. Each carries the key it
 * was sent under and every attempt made, so a caller can log exactly what happened and send the same operation again
 * later.
 */

/** An RFC 9457 problem, as the server sends it (`application/problem+json`), extensions included. */
export interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail?: string;
  readonly [extension: string]: unknown;
}

/** Why an attempt got no HTTP answer. */
export const AttemptError = {
  /** The connection failed or dropped: the request may or may not have been processed. */
  network: 'network',
  /** The attempt outlived `attemptTimeoutMs`. */
  timeout: 'timeout',
  /** The operation's `deadlineMs` passed. */
  deadline: 'deadline',
  /** The caller's `AbortSignal` fired. */
  aborted: 'aborted',
} as const;
export type AttemptError = (typeof AttemptError)[keyof typeof AttemptError];

/** One send of the operation, as it went over the wire. */
export type Attempt = {
  /** 1 for the first send. */
  readonly number: number;
  /** How long the client waited between the previous attempt's end and this one's start (0 for the first). */
  readonly waitedMs: number;
  /** From sending to the whole response read (or to the failure). */
  readonly durationMs: number;
} & (
  | {
      readonly kind: 'response';
      readonly status: number;
      /** `Idempotent-Replayed: true`: the stored answer of an earlier attempt; nothing ran again. */
      readonly replayed: boolean;
      /** The `Retry-After` header as sent, when the server sent a usable one. */
      readonly retryAfter: string | null;
      /** The problem's `type`, for an `application/problem+json` answer. */
      readonly problemType: string | null;
    }
  | { readonly kind: 'error'; readonly error: AttemptError }
);

/** Why a 2xx answer could not be taken as the success it claims to be. */
export const InvalidResponse = {
  /** No body where one was due. */
  emptyBody: 'empty-body',
  /** A body that is not JSON (a proxy's HTML page, a truncated document). */
  notJson: 'not-json',
  /** JSON, but refused by the operation's `parse` (`null` where an object was due, an object missing its id). */
  rejected: 'rejected',
} as const;
export type InvalidResponse = (typeof InvalidResponse)[keyof typeof InvalidResponse];

interface Sent {
  /** The key every attempt carried; keep it to send the same operation again. */
  readonly idempotencyKey: string;
  readonly attempts: readonly Attempt[];
}

/** How one `send()` of an operation ended; `T` is what the operation's `parse` returns. */
export type OperationResult<T> =
  | (Sent & {
      readonly kind: 'success';
      readonly status: number;
      /** The answer's JSON body, as the operation's `parse` returned it (`undefined` for a 204 or 205). */
      readonly body: T;
      /** The answer's headers (`Location`, `ETag`, ...). */
      readonly headers: Headers;
      /** The server answered from its record of an earlier attempt with this key (`Idempotent-Replayed`). */
      readonly replayed: boolean;
    })
  | (Sent & {
      readonly kind: 'problem';
      readonly status: number;
      readonly problem: Problem;
      /**
       * True when the client would have retried but ran out of attempts: the operation is not done, and sending it
       * again later with the same key is safe. False for a final answer (400, 401, 402, 404, 422, ...).
       */
      readonly retryable: boolean;
    })
  | (Sent & {
      /**
       * The server asked for a wait (`Retry-After`) that ends at or after the operation's deadline. Nothing was
       * retried early: the operation is not done, and sending it again with the same key from `retryAt` on is safe.
       */
      readonly kind: 'retry-later';
      readonly status: number;
      readonly problem: Problem;
      /** Epoch milliseconds: when the server said to come back. */
      readonly retryAt: number;
    })
  | (Sent & {
      /**
       * A 2xx whose body is not what it claims: empty, not JSON, or not the endpoint's answer. The server may have
       * done the work (it said so); a resend with the same key gets its stored answer, which may be just as broken.
       * Not retried: it is a server or proxy fault to report, not a state to wait out.
       */
      readonly kind: 'invalid-response';
      readonly status: number;
      readonly reason: InvalidResponse;
      /** What was wrong, in words, for a log. */
      readonly detail: string;
    })
  | (Sent & {
      /**
       * The last attempt got no answer (network, timeout), or the deadline or the caller stopped the client. The
       * operation may or may not have taken effect: send it again, with the same key, to find out.
       */
      readonly kind: 'no-answer';
      readonly reason: AttemptError;
    });
