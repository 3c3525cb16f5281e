import type middy from '@middy/core';
import type { Clock } from 'keystone-idempotency/engine';
import {
  answersEarly,
  type HttpEvent,
  type HttpResult,
  problemResponse,
  rawBody,
  requestHeader,
} from 'keystone-idempotency/http';
import { PaymentProblemType, PROBLEM_TYPE_BASE } from '../payments/problem-types';
import { DEFAULT_TOLERANCE_SECONDS, SIGNATURE_HEADER, verifySignature } from './signature';

export interface VerifyWebhookOptions {
  /** The shared secret; a function so it can be fetched once (Secrets Manager) and cached. */
  readonly secret: () => Promise<string>;
  readonly clock: Clock;
  readonly toleranceSeconds?: number;
}

/**
 * Rejects a webhook whose signature is missing, forged or stale with 401, before its body is parsed or anything is
 * stored: an unauthenticated request must not be able to claim an event id.
 */
export function verifyWebhookSignature(options: VerifyWebhookOptions): middy.MiddlewareObj<HttpEvent, HttpResult> {
  return {
    // A 401 ends the chain: the cleanups other middlewares registered (a metrics flush) run first.
    before: answersEarly(async function verifyWebhookSignatureBefore(request) {
      const verdict = verifySignature({
        header: requestHeader(request.event, SIGNATURE_HEADER),
        rawBody: rawBody(request.event) ?? '',
        secret: await options.secret(),
        nowSeconds: Math.floor(options.clock.now() / 1000),
        toleranceSeconds: options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS,
      });
      if (verdict.ok) return undefined;
      return problemResponse(
        {
          type: PaymentProblemType.invalidSignature,
          title: 'Invalid webhook signature',
          status: 401,
          detail: `The ${SIGNATURE_HEADER} header is ${verdict.reason === 'stale' ? 'too old or too far in the future' : verdict.reason}.`,
        },
        {},
        PROBLEM_TYPE_BASE,
      );
    }),
  };
}
