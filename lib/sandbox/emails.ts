import { z } from 'zod';
import { invalidBody } from './errors';
import { newId } from './ids';

/** Unknown fields are refused, as the charge endpoint refuses them. */
const emailRequestSchema = z.strictObject({
  to: z.string().regex(/^[^\s@]+@[^\s@]+$/, 'expected an email address'),
  subject: z.string().min(1),
  text: z.string(),
  metadata: z.record(z.string(), z.unknown()).optional(),
});

/** A validated `POST /v1/emails` body. */
export type EmailRequest = z.infer<typeof emailRequestSchema>;

/** An email the sandbox mailer "sent" (recorded, never delivered anywhere). */
export interface Email {
  readonly id: string;
  readonly object: 'email';
  readonly to: string;
  readonly subject: string;
  readonly text: string;
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly status: 'sent';
  /** The `Idempotency-Key` the email was sent under. */
  readonly idempotency_key: string;
  /** Unix seconds. */
  readonly created: number;
}

/** Validates an email request body (already parsed from JSON). */
export function parseEmailRequest(body: unknown): EmailRequest {
  const parsed = emailRequestSchema.safeParse(body);
  if (!parsed.success) throw invalidBody('email', parsed.error);
  return parsed.data;
}

/** The email a request sends. */
export function buildEmail(request: EmailRequest, idempotencyKey: string, createdSeconds: number): Email {
  return {
    id: newId('em'),
    object: 'email',
    to: request.to,
    subject: request.subject,
    text: request.text,
    metadata: request.metadata ?? {},
    status: 'sent',
    idempotency_key: idempotencyKey,
    created: createdSeconds,
  };
}
