import type { ScheduledEvent } from 'aws-lambda';
import type { TokenAuthorizer } from './api-gateway-authorizer';
import type { ProxyHandler } from './api-gateway-routes';
import type { LambdaHandler } from './lambda-invoke';
import type { SqsHandler } from './sqs-poller';

/**
 * The payments service's functions as the local stack wires them: the name it invokes each one by (in contexts and
 * logs), and its construct id in the CDK stack (lib/infra/functions.ts), which is how its bundle is found in a
 * synthesized template.
 */
export const SERVICE_FUNCTIONS = {
  paymentsCreate: { name: 'payments-create', constructId: 'PaymentsCreate' },
  paymentsGet: { name: 'payments-get', constructId: 'PaymentsGet' },
  authorizer: { name: 'authorizer', constructId: 'Authorizer' },
  webhookReceiver: { name: 'webhook-receiver', constructId: 'WebhookReceiver' },
  settlementConsumer: { name: 'settlement-consumer', constructId: 'SettlementConsumer' },
  paymentsCompleter: { name: 'payments-completer', constructId: 'PaymentsCompleter' },
} as const;

export type ServiceFunction = keyof typeof SERVICE_FUNCTIONS;

/** The handlers the local gateway, poller and schedule invoke: from the TypeScript sources, or from the bundles. */
export interface ServiceHandlers {
  readonly paymentsCreate: ProxyHandler;
  readonly paymentsGet: ProxyHandler;
  readonly authorizer: TokenAuthorizer;
  readonly webhookReceiver: ProxyHandler;
  readonly settlementConsumer: SqsHandler;
  // biome-ignore lint/suspicious/noExplicitAny: a scheduled function's result is not used
  readonly paymentsCompleter: LambdaHandler<ScheduledEvent, any>;
}

/**
 * The handlers imported from functions/*.ts into this process: fast to start and to debug, and every handler reads
 * this process's `process.env`. Set the environment before calling this: handlers read their configuration at
 * import (cold start).
 */
export async function sourceHandlers(): Promise<ServiceHandlers> {
  const [create, get, authorizer, webhook, consumer, completer] = await Promise.all([
    import('../../functions/payments-create'),
    import('../../functions/payments-get'),
    import('../../functions/authorizer'),
    import('../../functions/webhook-receiver'),
    import('../../functions/settlement-consumer'),
    import('../../functions/payments-completer'),
  ]);
  return {
    paymentsCreate: asProxyHandler(create.handler),
    paymentsGet: asProxyHandler(get.handler),
    authorizer: authorizer.handler,
    webhookReceiver: asProxyHandler(webhook.handler),
    settlementConsumer: consumer.handler,
    paymentsCompleter: completer.handler,
  };
}

/**
 * A middy handler declares the context its middlewares add (the parsed body, the idempotency handle); Lambda, and
 * this gateway, pass a plain Context, which the middlewares then extend.
 */
function asProxyHandler(handler: unknown): ProxyHandler {
  return handler as ProxyHandler;
}
