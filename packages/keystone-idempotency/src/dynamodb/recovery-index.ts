import { createHash } from 'node:crypto';
import { type DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { DueOperation } from '../engine/contract.js';
import { RecordAttribute as A, RECOVERY_INDEX, RECOVERY_SHARDS } from './layout.js';

/** The recovery index shard of a key: a stable spread of keys over {@link RECOVERY_SHARDS} partitions. */
export function recoveryShardOf(key: string): string {
  return String(createHash('sha256').update(key).digest().readUInt32BE(0) % RECOVERY_SHARDS);
}

/**
 * The operations due in the sparse recovery index at `now`, oldest first, at most `limit`: one query per shard (in
 * parallel), merged. Reads the index, never the table. The index is eventually consistent: the caller re-reads each
 * record before acting on it.
 */
export async function dueOperations(
  client: DynamoDBDocumentClient,
  tableName: string,
  now: number,
  limit: number,
): Promise<DueOperation[]> {
  const shards = await Promise.all(
    Array.from({ length: RECOVERY_SHARDS }, (_, shard) => dueInShard(client, tableName, String(shard), now, limit)),
  );
  return shards
    .flat()
    .sort((a, b) => a.recoverAt - b.recoverAt)
    .slice(0, limit);
}

async function dueInShard(
  client: DynamoDBDocumentClient,
  tableName: string,
  shard: string,
  now: number,
  limit: number,
): Promise<DueOperation[]> {
  const due: DueOperation[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await client.send(
      new QueryCommand({
        TableName: tableName,
        IndexName: RECOVERY_INDEX,
        KeyConditionExpression: '#shard = :shard AND #recoverAt <= :now',
        ExpressionAttributeNames: { '#shard': A.recoveryShard, '#recoverAt': A.recoverAt },
        ExpressionAttributeValues: { ':shard': shard, ':now': now },
        Limit: limit - due.length,
        ...(start ? { ExclusiveStartKey: start } : {}),
      }),
    );
    for (const item of page.Items ?? []) {
      due.push({ key: item[A.key] as string, recoverAt: Number(item[A.recoverAt]) });
    }
    start = page.LastEvaluatedKey;
  } while (start !== undefined && due.length < limit);
  return due;
}
