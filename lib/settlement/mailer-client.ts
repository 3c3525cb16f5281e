/** The email provider, from our side: every email carries an Idempotency-Key of ours, so a retry sends nothing new. */
export interface Email {
  readonly to: string;
  readonly subject: string;
  readonly text: string;
  readonly metadata?: Readonly<Record<string, string>>;
}

export class MailerClient {
  constructor(private readonly options: { baseUrl: string; timeoutMs: number }) {}

  /** Sends (or, under a key already used, finds) the email. Throws on anything but success: the caller retries. */
  async send(email: Email, idempotencyKey: string): Promise<{ id: string }> {
    const response = await fetch(new URL('/v1/emails', this.options.baseUrl), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': idempotencyKey },
      body: JSON.stringify(email),
      signal: AbortSignal.timeout(this.options.timeoutMs),
    });
    if (!response.ok) throw new Error(`mailer answered ${response.status}`);
    return (await response.json()) as { id: string };
  }
}
