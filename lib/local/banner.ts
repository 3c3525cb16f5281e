/**
 * What `npm start` prints once the stack serves. The example commands use shell variables that the banner's own
 * `export` lines define, so they run as printed; the README shows the same commands (a test keeps the two equal and
 * runs them against a started stack).
 */

/**
 * The first example: create a payment (run it twice: the second answer is a replay) and look at the processor's
 * ledger. One key and one body wherever the example is shown: the same key with another body is a 422.
 */
export const TRY_IT_COMMANDS: readonly string[] = [
  'curl -i -X POST "$API/payments" \\',
  `  -H "Authorization: Bearer $KEY" -H 'Idempotency-Key: order-42' -H 'Content-Type: application/json' \\`,
  `  -d '{"amount": 4200, "currency": "usd", "source": "tok_visa", "description": "Order 42"}'`,
  'curl -s "$PROCESSOR/charges"',
];

export interface BannerFacts {
  /** The REST API. */
  readonly apiUrl: string;
  /** The same routes behind an HTTP API (payload 2.0). */
  readonly httpApiUrl: string;
  readonly processorUrl: string;
  /** Which database the service runs on, and where it is. */
  readonly store: 'dynamodb' | 'postgres';
  readonly databaseUrl: string;
  readonly sqsEndpoint: string;
  readonly settlementQueueUrl: string;
  /** The double-tap demo page. */
  readonly demoUrl: string;
  /** DynamoDB's tables; on PostgreSQL, the schema (in both fields). */
  readonly tables: { readonly idempotency: string; readonly payments: string };
  readonly apiKeys: readonly { readonly apiKey: string; readonly accountId: string }[];
}

/** The shell lines that define `$API`, `$HTTP_API`, `$KEY` (the first account's key) and `$PROCESSOR`. */
export function exportLines(facts: BannerFacts): string[] {
  const [first] = facts.apiKeys;
  return [
    `export API=${facts.apiUrl}`,
    `export HTTP_API=${facts.httpApiUrl}`,
    ...(first ? [`export KEY=${first.apiKey}`] : []),
    `export PROCESSOR=${facts.processorUrl}`,
  ];
}

export function banner(facts: BannerFacts): string {
  const [first] = facts.apiKeys;
  return [
    '',
    `API listening on ${facts.apiUrl}`,
    `  http api           ${facts.httpApiUrl}  (the same routes behind an HTTP API, payload 2.0: docs/payments-api.md)`,
    `  demo page          ${facts.demoUrl}  (double tap: one key per payment, or one per request)`,
    `  OpenAPI            ${facts.apiUrl}/openapi.json`,
    `  sandbox processor  ${facts.processorUrl}  (GET /charges lists every charge; test cards and faults: docs/payments-api.md)`,
    `    and warehouse     GET /shipments lists every shipment booked; stock: sku_widget, sku_gadget (GET /inventory/{sku})`,
    facts.store === 'postgres'
      ? `  PostgreSQL         ${facts.databaseUrl}  schema ${facts.tables.idempotency}: idempotency_keys, payments, api_keys, orders, ...`
      : `  DynamoDB           ${facts.databaseUrl}  tables ${facts.tables.idempotency}, ${facts.tables.payments}`,
    `  SQS                ${facts.sqsEndpoint}  settlement queue ${facts.settlementQueueUrl}`,
    `  webhooks           ${facts.apiUrl}/webhooks/processor (signed by the sandbox processor)`,
    '',
    'API keys:',
    ...facts.apiKeys.map(({ apiKey, accountId }) => `  ${accountId}  ${apiKey}`),
    '',
    `Paste into your shell (the README's examples use these; KEY is ${first?.accountId ?? 'no account'}'s):`,
    ...exportLines(facts).map((line) => `  ${line}`),
    '',
    'Then try it (run it twice: the second answer is a replay, and the card is charged once):',
    ...TRY_IT_COMMANDS.map((line) => `  ${line}`),
    '',
    'Ctrl-C stops everything.',
  ].join('\n');
}
