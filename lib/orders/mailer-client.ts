import { errorFields, laterOf, noAnswer, type Unavailable } from '../runtime/outside-answer';

/**
 * The mailer, from an order's side of the wire: it keeps an Idempotency-Key per email (as the sandbox's does, and
 * as Postmark, Resend and SendGrid's v3 API offer), so the confirmation is sent under the step's downstream key and a
 * retry of the step finds the email already sent instead of sending a second. Outcomes are values: a mailer that is
 * down is a reason to retry later, a refusal is final, neither is an error.
 */
export interface ConfirmationEmail {
  readonly to: string;
  readonly subject: string;
  readonly text: string;
  readonly metadata: Readonly<Record<string, string>>;
}

export type SendOutcome =
  | { readonly kind: 'sent'; readonly id: string }
  /**
   * Refused for good (a 4xx other than 408, 409 and 429): an address it will not take, the key reused with another
   * body. Sending it again changes nothing. `message` is the mailer's own words, for logs.
   */
  | { readonly kind: 'refused'; readonly status: number; readonly message: string; readonly code?: string }
  /** No usable answer (`timeout`: none within the client's timeout): the email may or may not be sent; retry. */
  | Unavailable;

export class OrderMailerClient {
  private readonly fetch: typeof fetch;

  constructor(private readonly options: { baseUrl: string; timeoutMs: number; fetch?: typeof fetch }) {
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  async send(email: ConfirmationEmail, idempotencyKey: string): Promise<SendOutcome> {
    let response: Response;
    try {
      response = await this.fetch(new URL('/v1/emails', this.options.baseUrl), {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Idempotency-Key': idempotencyKey },
        body: JSON.stringify(email),
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
    } catch (error) {
      return noAnswer(error);
    }
    if (!response.ok) {
      const later = laterOf(response);
      if (later) return later;
    }
    const body: unknown = await response.json().catch(() => undefined);
    if (response.ok) {
      const id = (body as { id?: unknown } | undefined)?.id;
      return typeof id === 'string'
        ? { kind: 'sent', id }
        : { kind: 'unavailable', reason: 'server_error', status: response.status };
    }
    const { message, code } = errorFields(body);
    return {
      kind: 'refused',
      status: response.status,
      message: message ?? `the mailer answered ${response.status}`,
      ...(code ? { code } : {}),
    };
  }
}
