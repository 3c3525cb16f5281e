import { ProblemType, problemType, REPLAYED_HEADER } from 'keystone-idempotency/http';
import type {
  HeaderObject,
  OpenAPIObject,
  OperationObject,
  ParameterObject,
  ReferenceObject,
  ResponseObject,
  SchemaObject,
  ServerObject,
} from 'openapi3-ts/oas31';
import { Inventory, Order, OrderRequest, OrderWithSteps } from '../orders/schema';
import {
  CardDeclinedProblem,
  GatewayProblem,
  InsufficientStockProblem,
  InvalidBodyProblem,
  PaymentProblemType,
  PaymentRejectedProblem,
  PROBLEM_TYPE_BASE,
  ProblemDetails,
} from '../payments/problems';
import { Payment, PaymentRequest } from '../payments/schema';
import { ChargeSucceededEvent, WebhookAcknowledgement } from '../settlement/event';
import { SIGNATURE_HEADER } from '../webhooks/signature';
import { IDEMPOTENCY_KEY_DESCRIPTION, IDEMPOTENCY_KEY_PATTERN } from './idempotency-key';
import { openApiSchema } from './json-schema';

/**
 * The payments API as an OpenAPI 3.1 document, generated from the zod schemas the handlers validate requests with
 * and type their responses by (lib/payments/schema.ts, packages/keystone-idempotency/src/http/problem.ts, ...). Nothing here restates a field:
 * this file only says which schema answers which status, and why.
 *
 * Built by the local stack (served at /openapi.json) and by `npm run openapi`; never imported by a function, so the
 * generator stays out of the Lambda bundles.
 */

/** The stage the deployed REST API serves under (`STAGE_NAME` in lib/infra/api.ts; a test keeps them equal). */
const DEPLOYED_STAGE = 'v1';

const PROBLEM_JSON = 'application/problem+json';
const JSON_TYPE = 'application/json';

type Schema = SchemaObject | ReferenceObject;
type Responses = Record<string, ResponseObject>;

const schemaRef = (name: keyof typeof componentSchemas): ReferenceObject => ({
  $ref: `#/components/schemas/${name}`,
});
const headerRef = (name: keyof typeof headers): ReferenceObject => ({
  $ref: `#/components/headers/${name}`,
});
const parameterRef = (name: keyof typeof parameters): ReferenceObject => ({
  $ref: `#/components/parameters/${name}`,
});

const componentSchemas = {
  PaymentRequest: openApiSchema(PaymentRequest, 'request'),
  Payment: openApiSchema(Payment, 'response'),
  ChargeSucceededEvent: openApiSchema(ChargeSucceededEvent, 'request'),
  WebhookAcknowledgement: openApiSchema(WebhookAcknowledgement, 'response'),
  Problem: openApiSchema(ProblemDetails, 'response'),
  InvalidBodyProblem: openApiSchema(InvalidBodyProblem, 'response'),
  CardDeclinedProblem: openApiSchema(CardDeclinedProblem, 'response'),
  PaymentRejectedProblem: openApiSchema(PaymentRejectedProblem, 'response'),
  InsufficientStockProblem: openApiSchema(InsufficientStockProblem, 'response'),
  OrderRequest: openApiSchema(OrderRequest, 'request'),
  Order: openApiSchema(Order, 'response'),
  OrderWithSteps: openApiSchema(OrderWithSteps, 'response'),
  Inventory: openApiSchema(Inventory, 'response'),
  GatewayProblem: openApiSchema(GatewayProblem, 'response'),
} satisfies Record<string, unknown>;

/**
 * One of our problems, narrowed to the `type`s this response can carry: slugs of the HTTP adapter's (`ProblemType`)
 * or the service's own (`PaymentProblemType`), all under the service's base.
 */
function problem(
  schema:
    | 'Problem'
    | 'InvalidBodyProblem'
    | 'CardDeclinedProblem'
    | 'PaymentRejectedProblem'
    | 'InsufficientStockProblem',
  ...slugs: string[]
): Schema {
  return {
    allOf: [
      schemaRef(schema),
      { type: 'object', properties: { type: { enum: slugs.map((slug) => problemType(slug, PROBLEM_TYPE_BASE)) } } },
    ],
  };
}

const gatewayProblem = schemaRef('GatewayProblem');

function problemResponse(
  description: string,
  schema: Schema,
  responseHeaders: Record<string, ReferenceObject> = {},
): ResponseObject {
  return { description, headers: responseHeaders, content: { [PROBLEM_JSON]: { schema } } };
}

const oneOfThese = (...schemas: Schema[]): Schema => ({ anyOf: schemas });

const headers = {
  Location: {
    description: 'Where the payment can be read: `/payments/{id}`.',
    required: true,
    schema: { type: 'string', pattern: '^/payments/pay_[0-9a-f]{24}$' },
  },
  OrderLocation: {
    description: 'Where the order can be read: `/orders/{id}`.',
    required: true,
    schema: { type: 'string', pattern: '^/orders/ord_[0-9a-f]{24}$' },
  },
  IdempotentReplayed: {
    description:
      'Present (and `true`) when this is a stored response replayed byte for byte for a repeated key: nothing ran.',
    required: false,
    schema: { type: 'string', enum: ['true'] },
  },
  RetryAfterRequired: {
    description: 'Seconds to wait before retrying with the same Idempotency-Key.',
    required: true,
    schema: { type: 'integer', minimum: 1 },
  },
  RetryAfter: {
    description:
      'Seconds to wait before retrying with the same Idempotency-Key. Sent with every `processor-unavailable` ' +
      "problem; API Gateway's own errors carry none.",
    required: false,
    schema: { type: 'integer', minimum: 1 },
  },
} satisfies Record<string, HeaderObject>;

const parameters = {
  IdempotencyKey: {
    name: 'Idempotency-Key',
    in: 'header',
    required: true,
    description: IDEMPOTENCY_KEY_DESCRIPTION,
    schema: { type: 'string', pattern: IDEMPOTENCY_KEY_PATTERN },
    example: 'order-42',
  },
  PaymentId: {
    name: 'id',
    in: 'path',
    required: true,
    description: "The payment's id, from the 201's body or its Location header.",
    schema: { type: 'string' },
    example: 'pay_3f0c9a1e5b7d2c4e6a8b0d1f',
  },
  OrderId: {
    name: 'id',
    in: 'path',
    required: true,
    description: "The order's id, from the 201's body or its Location header.",
    schema: { type: 'string' },
    example: 'ord_3f0c9a1e5b7d2c4e6a8b0d1f',
  },
  Sku: {
    name: 'sku',
    in: 'path',
    required: true,
    description: 'A SKU, such as `sku_widget`.',
    schema: { type: 'string' },
    example: 'sku_widget',
  },
  ProcessorSignature: {
    name: SIGNATURE_HEADER,
    in: 'header',
    required: true,
    description:
      '`t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">` with the shared webhook secret; several `v1=` entries are ' +
      'allowed (secret rotation). Refused when missing, forged, or more than 5 minutes off.',
    schema: { type: 'string' },
  },
} satisfies Record<string, ParameterObject>;

/** Answers every route can get from API Gateway itself or from an unexpected failure. */
const gatewayResponses: Responses = {
  '413': problemResponse('The body is larger than API Gateway accepts (10 MB).', gatewayProblem),
  '429': problemResponse('Throttled by the stage (deployed only): slow down and retry.', gatewayProblem),
};

function internalErrors(): Responses {
  const ours = problem('Problem', ProblemType.internal);
  return {
    '500': problemResponse(
      'Our fault: `internal-error` (the body never carries internals; retrying with the same key is safe), or API ' +
        "Gateway's own (`about:blank`).",
      oneOfThese(ours, gatewayProblem),
    ),
  };
}

const unauthorized = problemResponse(
  'No or unknown API key: answered by API Gateway (`about:blank`, title `Unauthorized`), or `unauthenticated` when ' +
    'the request reached the function without an account.',
  oneOfThese(gatewayProblem, problem('Problem', ProblemType.unauthenticated)),
);

const createPayment: OperationObject = {
  operationId: 'createPayment',
  summary: 'Charge a card, at most once per Idempotency-Key',
  description:
    'Validates the body (400, before the key is claimed, so the key stays usable), claims the key, charges the ' +
    "processor under a key derived from yours, and stores the payment together with the key's outcome. Repeat the " +
    'request with the same key and body to retry safely.',
  tags: ['payments'],
  parameters: [parameterRef('IdempotencyKey')],
  requestBody: {
    required: true,
    content: {
      [JSON_TYPE]: {
        schema: schemaRef('PaymentRequest'),
        example: { amount: 4200, currency: 'usd', source: 'tok_visa', description: 'Order 42' },
      },
    },
  },
  responses: {
    '201': {
      description: 'The payment was made, or (with `Idempotent-Replayed: true`) this is the stored answer.',
      headers: { Location: headerRef('Location'), [REPLAYED_HEADER]: headerRef('IdempotentReplayed') },
      content: { [JSON_TYPE]: { schema: schemaRef('Payment') } },
    },
    '400': problemResponse(
      '`invalid-body`: the body is not JSON or breaks the schema; `errors` lists every problem. ' +
        '`idempotency-key-missing` / `idempotency-key-invalid`: no key, or not a valid one. Not stored: fix and resend. ' +
        'Deployed, API Gateway turns away a body that is not a JSON object itself, with the same `invalid-body` ' +
        'problem and `errors` list.',
      oneOfThese(
        problem('InvalidBodyProblem', ProblemType.invalidBody),
        problem('Problem', ProblemType.idempotencyKeyMissing, ProblemType.idempotencyKeyInvalid),
        gatewayProblem,
      ),
    ),
    '401': unauthorized,
    '402': {
      ...problemResponse(
        '`card-declined`: the processor declined the card (`decline_code`). Stored and replayed.',
        problem('CardDeclinedProblem', PaymentProblemType.cardDeclined),
      ),
      headers: { [REPLAYED_HEADER]: headerRef('IdempotentReplayed') },
    },
    '409': problemResponse(
      '`request-in-flight`: the original request with this key is still running. Retry after `Retry-After`.',
      problem('Problem', ProblemType.requestInFlight),
      { 'Retry-After': headerRef('RetryAfterRequired') },
    ),
    '415': problemResponse(
      '`unsupported-media-type`: the body is declared in a charset other than UTF-8 (JSON is UTF-8, RFC 8259). ' +
        'Not stored: resend it as UTF-8 with the same key.',
      problem('Problem', ProblemType.unsupportedMediaType),
    ),
    '422': problemResponse(
      '`idempotency-key-reused`: this key was already used with a different body. `payment-rejected`: the ' +
        'processor refused a value the client chose (`errors` names it, e.g. an unknown card token); stored and ' +
        'replayed, so fix it and send a new request with a new key.',
      oneOfThese(
        problem('Problem', ProblemType.idempotencyKeyReused),
        problem('PaymentRejectedProblem', PaymentProblemType.paymentRejected),
      ),
    ),
    ...gatewayResponses,
    ...internalErrors(),
    '502': problemResponse(
      '`processor-unavailable`: the processor failed or dropped the connection; retry with the same key, it will ' +
        "not charge twice. Or API Gateway's own (`about:blank`) when the function failed.",
      oneOfThese(problem('Problem', PaymentProblemType.processorUnavailable), gatewayProblem),
      { 'Retry-After': headerRef('RetryAfter') },
    ),
    '503': problemResponse(
      '`processor-unavailable`: the processor is overloaded; retry with the same key after `Retry-After`.',
      problem('Problem', PaymentProblemType.processorUnavailable),
      { 'Retry-After': headerRef('RetryAfterRequired') },
    ),
    '504': problemResponse(
      '`processor-unavailable`: the processor timed out; retry with the same key, which finds any charge made ' +
        "meanwhile. Or API Gateway's own (`about:blank`) when the integration timed out.",
      oneOfThese(problem('Problem', PaymentProblemType.processorUnavailable), gatewayProblem),
      { 'Retry-After': headerRef('RetryAfter') },
    ),
  },
};

const getPayment: OperationObject = {
  operationId: 'getPayment',
  summary: "Read one of the caller's payments",
  description: "`status` becomes `settled`, with `settled_at`, once the processor's webhook has been processed.",
  tags: ['payments'],
  parameters: [parameterRef('PaymentId')],
  responses: {
    '200': { description: 'The payment.', content: { [JSON_TYPE]: { schema: schemaRef('Payment') } } },
    '401': unauthorized,
    '404': problemResponse(
      "`not-found`: no such payment for this account (another account's payment is indistinguishable from none).",
      problem('Problem', PaymentProblemType.notFound),
    ),
    ...gatewayResponses,
    ...internalErrors(),
    '502': problemResponse("API Gateway's own: the function failed.", gatewayProblem),
    '504': problemResponse("API Gateway's own: the integration timed out.", gatewayProblem),
  },
};

/** The answers POST /orders shares with POST /payments: the body, the key, the card's values. */
const sameAsPayments = (status: '400' | '415' | '422'): ResponseObject =>
  (createPayment.responses as Responses)[status] as ResponseObject;

/** An outside system of an order's (processor, warehouse, mailer) that did not answer: retry with the same key. */
const orderUnavailable = (status: '502' | '503' | '504'): ResponseObject =>
  problemResponse(
    `\`processor-unavailable\`, \`warehouse-unavailable\` or \`mailer-unavailable\` (${status}): that step did not ` +
      'finish; retry with the same key after `Retry-After`, and the order resumes there: no completed step runs ' +
      'again.' +
      (status === '503'
        ? ' Or `stock-contended`: other orders took and gave back the stock while this one reserved it, and nothing ' +
          'was reserved or charged; retry with the same key.'
        : '') +
      " Or API Gateway's own (`about:blank`).",
    oneOfThese(
      problem(
        'Problem',
        PaymentProblemType.processorUnavailable,
        PaymentProblemType.warehouseUnavailable,
        PaymentProblemType.mailerUnavailable,
        ...(status === '503' ? [PaymentProblemType.stockContended] : []),
      ),
      gatewayProblem,
    ),
    { 'Retry-After': headerRef('RetryAfter') },
  );

const createOrder: OperationObject = {
  operationId: 'createOrder',
  summary: 'Place an order: reserve, charge, ship and confirm, each at most once per Idempotency-Key',
  description:
    'Every rule of `POST /payments`, for an operation with four steps, each a recovery point: the stock is ' +
    'reserved (with its checkpoint), the card charged (the processor dedupes by a key derived from yours), the ' +
    "shipment booked (the warehouse takes no key: a booking whose answer was lost is looked up by the order's id), " +
    'and the confirmation sent (the mailer dedupes by key). A retry, a takeover or the completer resumes after the ' +
    'last completed step.',
  tags: ['orders'],
  parameters: [parameterRef('IdempotencyKey')],
  requestBody: {
    required: true,
    content: {
      [JSON_TYPE]: {
        schema: schemaRef('OrderRequest'),
        example: {
          items: [{ sku: 'sku_widget', quantity: 2 }],
          amount: 4200,
          currency: 'usd',
          source: 'tok_visa',
          email: 'buyer@example.com',
        },
      },
    },
  },
  responses: {
    '201': {
      description: 'The order is confirmed, or (with `Idempotent-Replayed: true`) this is the stored answer.',
      headers: { Location: headerRef('OrderLocation'), [REPLAYED_HEADER]: headerRef('IdempotentReplayed') },
      content: { [JSON_TYPE]: { schema: schemaRef('Order') } },
    },
    '400': sameAsPayments('400'),
    '401': unauthorized,
    '402': {
      ...problemResponse(
        "`card-declined`: the processor declined the card; the order's reservation was given back. Stored and replayed.",
        problem('CardDeclinedProblem', PaymentProblemType.cardDeclined),
      ),
      headers: { [REPLAYED_HEADER]: headerRef('IdempotentReplayed') },
    },
    '409': problemResponse(
      '`insufficient-stock`: the stock cannot cover the order (`shortages`); nothing was reserved or charged. Stored ' +
        'and replayed. `request-in-flight`: the original request with this key is still running; retry after ' +
        '`Retry-After`.',
      oneOfThese(
        problem('InsufficientStockProblem', PaymentProblemType.insufficientStock),
        problem('Problem', ProblemType.requestInFlight),
      ),
    ),
    '415': sameAsPayments('415'),
    '422': problemResponse(
      `${sameAsPayments('422').description} \`shipment-refused\`: the warehouse refused to ship the order for good ` +
        '(after its charge): the charge was refunded and the stock given back before this answer was stored; a retry ' +
        'of the same key replays it.',
      oneOfThese(
        problem('Problem', ProblemType.idempotencyKeyReused),
        problem('PaymentRejectedProblem', PaymentProblemType.paymentRejected),
        problem('Problem', PaymentProblemType.shipmentRefused),
      ),
      { [REPLAYED_HEADER]: headerRef('IdempotentReplayed') },
    ),
    ...gatewayResponses,
    ...internalErrors(),
    '502': orderUnavailable('502'),
    '503': orderUnavailable('503'),
    '504': orderUnavailable('504'),
  },
};

const getOrder: OperationObject = {
  operationId: 'getOrder',
  summary: "Read one of the caller's orders and each step's state",
  description:
    'Each step is `pending` until its checkpoint commits, then `completed`; a reservation given back is `released`, a ' +
    'charge given back `refunded`, a step an outside system refused for good `refused` (a declined card: `charge`), ' +
    'and a step the order ended before `skipped`. The order is `declined` when its card was refused, `refused` when a ' +
    'step after the charge was (the charge refunded, the stock given back).',
  tags: ['orders'],
  parameters: [parameterRef('OrderId')],
  responses: {
    '200': { description: 'The order.', content: { [JSON_TYPE]: { schema: schemaRef('OrderWithSteps') } } },
    '401': unauthorized,
    '404': problemResponse(
      "`not-found`: no such order for this account (another account's order is indistinguishable from none).",
      problem('Problem', PaymentProblemType.notFound),
    ),
    ...gatewayResponses,
    ...internalErrors(),
    '502': problemResponse("API Gateway's own: the function failed.", gatewayProblem),
    '504': problemResponse("API Gateway's own: the integration timed out.", gatewayProblem),
  },
};

const getInventory: OperationObject = {
  operationId: 'getInventory',
  summary: 'Read the stock of a SKU',
  description: '`reserved` counts the units orders hold; `available` what can still be ordered.',
  tags: ['orders'],
  parameters: [parameterRef('Sku')],
  responses: {
    '200': { description: 'The stock.', content: { [JSON_TYPE]: { schema: schemaRef('Inventory') } } },
    '401': unauthorized,
    '404': problemResponse('`not-found`: no such SKU.', problem('Problem', PaymentProblemType.notFound)),
    ...gatewayResponses,
    ...internalErrors(),
    '502': problemResponse("API Gateway's own: the function failed.", gatewayProblem),
    '504': problemResponse("API Gateway's own: the integration timed out.", gatewayProblem),
  },
};

const receiveWebhook: OperationObject = {
  operationId: 'receiveProcessorWebhook',
  summary: "The processor's webhook: a signed charge.succeeded event",
  description:
    'Called by the payment processor, not by API clients: authenticated by its HMAC signature instead of an API ' +
    'key. The event id is the idempotency key: a resent event replays the stored 200 and is not enqueued again.',
  tags: ['webhooks'],
  security: [],
  parameters: [parameterRef('ProcessorSignature')],
  requestBody: { required: true, content: { [JSON_TYPE]: { schema: schemaRef('ChargeSucceededEvent') } } },
  responses: {
    '200': {
      description: 'Accepted and queued for settlement, or (with `Idempotent-Replayed: true`) already accepted.',
      headers: { [REPLAYED_HEADER]: headerRef('IdempotentReplayed') },
      content: { [JSON_TYPE]: { schema: schemaRef('WebhookAcknowledgement') } },
    },
    '400': problemResponse(
      '`invalid-body`: a genuine signature over a body that is not such an event, an `id` longer than 255 ' +
        'characters among them (the event id is the idempotency key).',
      problem('InvalidBodyProblem', ProblemType.invalidBody),
    ),
    '401': problemResponse(
      '`invalid-signature`: the signature is missing, forged or stale. Nothing was stored.',
      problem('Problem', PaymentProblemType.invalidSignature),
    ),
    '409': problemResponse(
      '`request-in-flight`: the same event is being processed right now.',
      problem('Problem', ProblemType.requestInFlight),
      { 'Retry-After': headerRef('RetryAfterRequired') },
    ),
    '422': problemResponse(
      '`idempotency-key-reused`: an event with this id but a different body was already accepted.',
      problem('Problem', ProblemType.idempotencyKeyReused),
    ),
    ...gatewayResponses,
    ...internalErrors(),
    '502': problemResponse("API Gateway's own: the function failed.", gatewayProblem),
    '504': problemResponse("API Gateway's own: the integration timed out.", gatewayProblem),
  },
};

export interface OpenApiDocumentOptions {
  /** The URL this document is served from, first among `servers`; e.g. the local stack's `http://127.0.0.1:3000`. */
  readonly serverUrl?: string;
  /**
   * What `serverUrl` is, as its entry in `servers` says. Default: the local stack that serves this document (its
   * /openapi.json route); a document printed for another API must say which one instead.
   */
  readonly serverDescription?: string;
}

/** The whole document; cheap to build (a few milliseconds), so callers build it when they need it. */
export function openApiDocument(options: OpenApiDocumentOptions = {}): OpenAPIObject {
  const servers: ServerObject[] = [
    ...(options.serverUrl
      ? [{ url: options.serverUrl, description: options.serverDescription ?? 'This local stack (npm start)' }]
      : []),
    {
      url: `https://{restApiId}.execute-api.{region}.amazonaws.com/${DEPLOYED_STAGE}`,
      description: "A deployed environment: its API's id and region are outputs of `cdk deploy`.",
      variables: {
        restApiId: { default: 'abc123defg', description: 'The REST API id' },
        region: { default: 'us-east-1', description: 'The AWS region' },
      },
    },
  ];
  return {
    openapi: '3.1.1',
    info: {
      title: 'Keystone payments API',
      version: '1.0.0',
      description:
        'Payments where a retry can never charge twice. Every POST /payments carries an `Idempotency-Key`. The same key with the same body is one operation, ' +
        'however often it is sent; a failure before completion releases the key so the retry runs it, under the ' +
        `same downstream key at the processor. Every error is \`${PROBLEM_JSON}\` (RFC 9457) with a stable ` +
        `\`type\` of the form \`${PROBLEM_TYPE_BASE}<slug>\`, which names the problem and is not a page to fetch.`,
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers,
    security: [{ bearerAuth: [] }],
    tags: [
      { name: 'payments', description: 'Creating and reading payments.' },
      { name: 'orders', description: 'Orders of several steps, and the stock they reserve.' },
      { name: 'webhooks', description: "The payment processor's callbacks to this API." },
    ],
    paths: {
      '/payments': { post: createPayment },
      '/payments/{id}': { get: getPayment },
      '/orders': { post: createOrder },
      '/orders/{id}': { get: getOrder },
      '/inventory/{sku}': { get: getInventory },
      '/webhooks/processor': { post: receiveWebhook },
    },
    components: {
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description: 'Your API key (`sk_test_...`; npm start prints two) as `Authorization: Bearer <key>`.',
        },
      },
      parameters,
      headers,
      schemas: componentSchemas as Record<string, SchemaObject>,
    },
  };
}
