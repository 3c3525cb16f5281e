/**
 * The local stack: `npm start`. Everything on 127.0.0.1, the same handler code Lambda runs. Every variable it reads
 * is listed in the README ("Local settings"); the main ones:
 *
 *   PORT                       API port (default 3000; 0 picks a free one)
 *   HTTP_API_PORT              the same routes behind an emulated HTTP API, payload 2.0 (default: a free port)
 *   PROCESSOR_PORT             the sandbox processor's port (default: a free one)
 *   DYNAMODB_ENDPOINT          use this DynamoDB (Local) instead of starting one
 *   STORE                      postgres: run on PostgreSQL (embedded, or DATABASE_URL) instead of DynamoDB
 *   PROCESSOR_URL              use this processor instead of starting the sandbox
 *   LOCAL_API_KEYS             "key1:acct_1,key2:acct_2" (default: two demo accounts, keys printed below)
 */
import { banner } from '../lib/local/banner';
import { startLocalStack } from '../lib/local/stack';

async function main(): Promise<void> {
  // Node 20.20 is a supported line (README, "Node versions"): the AWS SDK's notice that its releases after January
  // 2027 need Node 22 says nothing a user of the local stack can act on. The SDK checks it when a client is built,
  // which is after this line; jest sets the same for the tests.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const stack = await startLocalStack();
  console.log(
    banner({
      apiUrl: stack.apiUrl,
      httpApiUrl: stack.httpApiUrl,
      processorUrl: stack.processorUrl,
      store: stack.store,
      databaseUrl: stack.databaseUrl,
      sqsEndpoint: stack.sqsEndpoint,
      settlementQueueUrl: stack.settlementQueue.queueUrl,
      demoUrl: stack.demoUrl,
      tables: stack.tables,
      apiKeys: stack.apiKeys,
    }),
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
