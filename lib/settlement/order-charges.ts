import type middy from '@middy/core';
import { answersEarly, type HttpEvent, type HttpResult, rawBody } from 'keystone-idempotency/http';
import type { WebhookAcknowledgement } from './event';

/**
 * An order's charge settles nothing here: the order records it in its own charge step (lib/orders), and its
 * completion, if the client never comes back, is the completer's. The processor still sends its `charge.succeeded`,
 * whose metadata names an `order_id` and no `payment_id`; refused as a body that is not a payment's event (400), it
 * would be retried by the processor for its whole retry window. Acknowledged (200, nothing queued or stored) once its
 * signature has been checked, so that this runs after `verifyWebhookSignature` and before the body's validation.
 */
export function acknowledgeOrderCharges(): middy.MiddlewareObj<HttpEvent, HttpResult> {
  return {
    before: answersEarly(async function acknowledgeOrderChargesBefore(request) {
      const event = parsed(rawBody(request.event));
      const metadata = event?.data?.object?.metadata;
      if (typeof event?.id !== 'string' || typeof metadata?.order_id !== 'string') return undefined;
      if (metadata.payment_id !== undefined) return undefined;
      const acknowledgement: WebhookAcknowledgement = { received: event.id };
      return {
        statusCode: 200,
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(acknowledgement),
      };
    }),
  };
}

interface MaybeChargeEvent {
  readonly id?: unknown;
  readonly data?: { readonly object?: { readonly metadata?: Readonly<Record<string, unknown>> } };
}

function parsed(body: string | null | undefined): MaybeChargeEvent | undefined {
  if (body === undefined || body === null) return undefined;
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === 'object' && value !== null ? (value as MaybeChargeEvent) : undefined;
  } catch {
    return undefined; // the body's validation answers it
  }
}
