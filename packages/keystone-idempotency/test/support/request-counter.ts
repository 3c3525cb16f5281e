import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';

/**
 * Counts the HTTP requests a client sends, by command name. Installed at the `deserialize` step, which runs once per
 * attempt (inside the retry middleware), so an SDK retry counts as the extra request it is.
 */
export function countRequests(client: DynamoDBClient): { readonly sent: string[]; reset(): void } {
  const sent: string[] = [];
  client.middlewareStack.add(
    (next, context) => async (args) => {
      sent.push(context.commandName ?? 'unknown');
      return next(args);
    },
    { step: 'deserialize', name: 'countRequests', override: true },
  );
  return {
    sent,
    reset() {
      sent.length = 0;
    },
  };
}
