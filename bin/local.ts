/**
 * The local stack: `npm start`. Everything on 127.0.0.1, the same handler code Lambda runs.
 *
 *   PORT                       API port (default 3000)
 *   DYNAMODB_ENDPOINT          use this DynamoDB (Local) instead of starting one
 *   PROCESSOR_URL              use this processor instead of starting the sandbox
 *   LOCAL_API_KEYS             "key1:acct_1,key2:acct_2" (default: two demo accounts, keys printed below)
 *   IDEMPOTENCY_LEASE_SECONDS  IDEMPOTENCY_TTL_SECONDS  PROCESSOR_TIMEOUT_MS
 */
import { startLocalStack } from '../lib/local/stack';

async function main(): Promise<void> {
  const stack = await startLocalStack();
  const [first] = stack.apiKeys;
  console.log(
    [
      '',
      `API listening on ${stack.apiUrl}`,
      `  sandbox processor  ${stack.processorUrl}  (GET /charges lists every charge)`,
      `  DynamoDB           ${stack.dynamoDbEndpoint}  tables ${stack.tables.idempotency}, ${stack.tables.payments}`,
      `  SQS                ${stack.sqsEndpoint}  settlement queue ${stack.settlementQueue.queueUrl}`,
      `  webhooks           ${stack.apiUrl}/webhooks/processor (signed by the sandbox processor)`,
      `  demo page          ${stack.demoUrl}  (double tap: one key per payment, or one per request)`,
      '',
      'API keys:',
      ...stack.apiKeys.map(({ apiKey, accountId }) => `  ${accountId}  ${apiKey}`),
      '',
      'Try it (run it twice: the second answer is a replay, and the card is charged once):',
      `  curl -i -X POST ${stack.apiUrl}/payments \\`,
      `    -H 'Authorization: Bearer ${first?.apiKey}' \\`,
      "    -H 'Idempotency-Key: order-42' -H 'Content-Type: application/json' \\",
      `    -d '{"amount": 4200, "currency": "usd", "source": "tok_visa"}'`,
      '',
      'Ctrl-C stops everything.',
    ].join('\n'),
  );

  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(130); // a second signal means now
    stopping = true;
    console.log(`${signal}: stopping`);
    stack.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error('could not stop cleanly:', error);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
