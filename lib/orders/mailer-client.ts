/**
 * The mailer, from an order's side of the wire: it keeps an Idempotency-Key per email (as the sandbox's does, and
 * as Postmark, Resend and SendGrid's v3 API offer), so the confirmation is sent under the step's downstream key and a
 * retry of the step finds the email already sent instead of sending a second. Outcomes are values: a mailer that is
 * down is a reason to retry later, not an error.
 */
export interface ConfirmationEmail {
  readonly to: string;
  readonly subject: string;
  readonly text: string;
  readonly metadata: Readonly<Record<string, string>>;
}

export type SendOutcome =
  | { readonly kind: 'sent'; readonly id: string }
  /** Refused for good (a 4xx): the key reused with another body, an address it will not take. */
  | { readonly kind: 'rejected'; readonly status: number }
  | { readonly kind: 'unavailable'; readonly status?: number };

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
    } catch {
      return { kind: 'unavailable' };
    }
    if (response.status === 429 || response.status >= 500) return { kind: 'unavailable', status: response.status };
    if (!response.ok) return { kind: 'rejected', status: response.status };
    try {
      const { id } = (await response.json()) as { id?: unknown };
      return typeof id === 'string' ? { kind: 'sent', id } : { kind: 'unavailable', status: response.status };
    } catch {
      return { kind: 'unavailable', status: response.status };
    }
  }
}
