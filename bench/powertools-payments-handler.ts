import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { Logger } from '@aws-lambda-powertools/logger';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, PutCommand, type PutCommandInput } from '@aws-sdk/lib-dynamodb';
import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import type { EffectItem } from 'keystone-idempotency/dynamodb';
import { systemClock } from 'keystone-idempotency/engine';
import { problemErrorHandler, validateJsonBody, type WithBody } from 'keystone-idempotency/http';
import { processorClient } from '../lib/payments/config';
import { createPayment } from '../lib/payments/create-payment';
import { dynamoDbData } from '../lib/payments/data-dynamodb';
import { PaymentRequest } from '../lib/payments/schema';
import { dynamoDbConfig } from '../lib/runtime/clients';
import { requireEnv } from '../lib/runtime/env';
import { idempotencyTable } from '../lib/tables/definitions';

/**
 * POST /payments as it would be written on Powertools idempotency instead of this library: the cold-start benchmark's
 * comparison point (bench/cold-start.ts bundles both exactly as the CDK stack bundles functions). Same validation,
 * problem responses, processor client and createPayment flow as functions/payments-create.ts; the handler is wrapped
 * in `makeIdempotent` (key: account and Idempotency-Key header; payload validation on the body; 24 hours).
 *
 * What it cannot express is what the benchmark is about: Powertools has no downstream key (the client's key is
 * forwarded instead), and the payment row is written on its own, not in one transaction with the key's completion.
 */
const logger = new Logger({ serviceName: 'payments' });
const deps = { processor: processorClient(), payments: dynamoDbData().payments, clock: systemClock };
const client = new DynamoDBClient(dynamoDbConfig());
const documentClient = DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
const persistenceStore = new DynamoDBPersistenceLayer({
  tableName: requireEnv(idempotencyTable.envVar),
  awsSdkV3Client: client,
});
const config = new IdempotencyConfig({
  eventKeyJmesPath: '[requestContext.authorizer.accountId, headers."Idempotency-Key"]',
  payloadValidationJmesPath: 'powertools_json(body)',
  throwOnNoIdempotencyKey: true,
  expiresAfterSeconds: 24 * 60 * 60,
});

type PaymentContext = Context & WithBody<PaymentRequest>;

async function createPaymentHandler(
  event: APIGatewayProxyEvent,
  context: PaymentContext,
): Promise<APIGatewayProxyResult> {
  const accountId = String(event.requestContext.authorizer?.accountId);
  const staged: EffectItem[] = [];
  const response = await createPayment(deps, {
    accountId,
    body: context.body,
    idempotency: {
      key: `${accountId}:${event.headers['Idempotency-Key']}`,
      downstreamKey: `${accountId}:${event.headers['Idempotency-Key']}`,
      attempt: 1,
      stage: (item) => staged.push(item),
      // No recovery points here: a step just runs (payments has one outside call and no steps).
      step: (name, run) =>
        run({
          name,
          downstreamKey: `${accountId}:${event.headers['Idempotency-Key']}:${name}`,
          attempt: 1,
          stage: (...items) => staged.push(...items),
        }),
    },
  });
  for (const item of staged) await documentClient.send(new PutCommand(item.Put as PutCommandInput));
  return response;
}

export const handler = middy<APIGatewayProxyEvent, APIGatewayProxyResult, Error, PaymentContext>(
  makeIdempotent(createPaymentHandler, { persistenceStore, config }),
)
  .use(problemErrorHandler({ logger }))
  .use(validateJsonBody(PaymentRequest));
